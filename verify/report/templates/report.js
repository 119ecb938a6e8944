(function () {
  var text = document.getElementById('filter-text');
  var boxes = Array.prototype.slice.call(document.querySelectorAll('input.vfilter'));
  var onlyUnexpected = document.getElementById('only-unexpected');
  var cells = Array.prototype.slice.call(document.querySelectorAll('a.app-ref'));
  var rows = Array.prototype.slice.call(document.querySelectorAll('tr.mrow'));
  var apps = Array.prototype.slice.call(document.querySelectorAll('details.app'));
  var groups = Array.prototype.slice.call(document.querySelectorAll('div.passgroup'));
  var count = document.getElementById('shown-count');

  var params = new URLSearchParams(location.search);
  // ?proof=witnessed|sizes|proved: EQUIVALENT applications by how they stand;
  // ?unexpected=0: only the verdicts that equal the baseline
  var proof = params.get('proof') || '';
  var onlyExpected = params.get('unexpected') === '0';

  function keep(el, q, verdicts) {
    var v = el.getAttribute('data-verdict');
    if (verdicts.indexOf(v) < 0) return false;
    if (onlyUnexpected.checked && el.getAttribute('data-unexpected') !== '1') return false;
    if (onlyExpected && el.getAttribute('data-unexpected') === '1') return false;
    if (proof && el.getAttribute('data-proof') !== proof) return false;
    if (!q) return true;
    var hay = (el.getAttribute('data-pass') + ' ' + el.getAttribute('data-case') + ' ' + v)
      .toLowerCase();
    return q.split(/\s+/).every(function (w) { return hay.indexOf(w) >= 0; });
  }

  function apply() {
    var q = text.value.trim().toLowerCase();
    var verdicts = boxes.filter(function (b) { return b.checked; })
      .map(function (b) { return b.value; });
    cells.forEach(function (c) { c.classList.toggle('filtered', !keep(c, q, verdicts)); });
    rows.forEach(function (r) {
      r.classList.toggle('filtered', !r.querySelector('a.app-ref:not(.filtered)'));
    });
    var shown = 0;
    apps.forEach(function (a) {
      var k = keep(a, q, verdicts);
      a.classList.toggle('filtered', !k);
      if (k) shown += 1;
    });
    groups.forEach(function (g) {
      g.classList.toggle('filtered', !g.querySelector('details.app:not(.filtered)'));
    });
    count.textContent = String(shown);
  }

  function measure() {
    // the bar is sticky on wide screens only (report.css); where it is not,
    // nothing is covered and no offset is needed
    var bar = document.getElementById('controls');
    var sticky = getComputedStyle(bar).position === 'sticky';
    var h = sticky ? bar.offsetHeight : 0;
    document.documentElement.style.setProperty('--controls-h', h + 'px');
  }

  function reveal(el) {
    // open the target and every folded section around it, and show it
    // whatever the filters say
    for (var p = el; p; p = p.parentElement) {
      if (p.tagName === 'DETAILS') p.open = true;
      if (p.classList) p.classList.remove('filtered');
    }
  }

  function target(hash) {
    var id = '';
    try { id = decodeURIComponent((hash || '').slice(1)); } catch (e) { id = ''; }
    return id ? document.getElementById(id) : null;
  }

  function openTarget() {  // a link followed inside the page (a matrix cell, a finding)
    var el = target(location.hash);
    if (!el) return;
    reveal(el);
    el.scrollIntoView();
  }

  // The page opened with an anchor (index.html#app-...): the browser's own
  // jump to it at load leaves headless Chromium's screenshot blank, so the
  // anchor is taken off the address before load and the page shows the
  // application it names first, in #linked at the top (the address gets the
  // anchor back once loaded, without a jump).
  var initial = location.hash;
  if (initial) history.replaceState(null, '', location.pathname + location.search);
  function showInitial() {
    var el = target(initial);
    if (!el) return;
    reveal(el);
    var app = el.closest('details.app');
    var linked = document.getElementById('linked');
    if (app && linked) {
      var g = app.closest('div.passgroup');
      var back = document.getElementById('linked-where');
      if (back && g) {
        var h = g.querySelector('h2.passhead');
        back.textContent = 'its place: ' + (h ? h.firstChild.textContent.trim() : '') +
                           ', among the applications below';
      }
      linked.appendChild(app);
      linked.hidden = false;
      shown = el;
    } else {
      pending = el;  // a heading or a section: scrolled to once the page is loaded
    }
  }
  var pending = null, shown = null;
  function recordJump(el, how) {
    // what the opening anchor showed, set once the jump is over: the element's
    // id, how (linked: moved into #linked; scrolled; none) and where its box
    // sits in the window (top bottom window-height); a test reads it from the DOM
    var root = document.documentElement, r = el ? el.getBoundingClientRect() : null;
    root.setAttribute('data-jump-view', r ? [Math.round(r.top), Math.round(r.bottom),
                                             window.innerHeight].join(' ') : '');
    root.setAttribute('data-jump-how', how);
    root.setAttribute('data-jump', el ? el.id : '');
  }
  window.addEventListener('load', function () {
    setTimeout(function () {
      if (initial && !location.hash)
        history.replaceState(null, '', location.pathname + location.search + initial);
    }, 0);
    // a scroll before headless Chromium's first paint blanks its screenshot;
    // a quarter second later it is a jump a reader barely sees
    if (pending) setTimeout(function () {
      pending.scrollIntoView();
      recordJump(pending, 'scrolled');
    }, 250);
    else recordJump(shown, shown ? 'linked' : 'none');
  });

  // detail.js (beside the page): diffs and tables loaded when asked for
  var detail = null, waiting = [], loading = false;
  window.reportDetail = function (b64) {
    var bin = atob(b64), bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
    new Response(stream).text().then(function (t) {
      detail = JSON.parse(t);
      var w = waiting; waiting = [];
      w.forEach(function (f) { f(); });
    });
  };
  function withDetail(done, failed) {
    if (detail) { done(); return; }
    waiting.push(done);
    if (loading) return;
    loading = true;
    var s = document.createElement('script');
    s.src = document.body.getAttribute('data-detail') || 'detail.js';
    s.onerror = function () { loading = false; waiting = []; failed(); };
    document.head.appendChild(s);
  }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;  // text, never markup
    return e;
  }
  function diffBlock(title, diff) {
    var d = el('details', 'inner'), pre = el('pre', 'diff');
    d.appendChild(el('summary', '', title));
    diff.split('\n').forEach(function (ln) {
      var c = 'dctx';
      if (ln.indexOf('+++') === 0 || ln.indexOf('---') === 0) c = 'dh';
      else if (ln.indexOf('@@') === 0) c = 'dhunk';
      else if (ln[0] === '+') c = 'dadd';
      else if (ln[0] === '-') c = 'ddel';
      pre.appendChild(el('span', c, ln || ' '));
    });
    d.appendChild(pre);
    d.open = diff.split('\n').length <= 80;
    return d;
  }
  function tableBlock(title, tensors) {
    var d = el('details', 'inner'), t = el('table', 'numeric'), head = el('tr');
    d.appendChild(el('summary', '', title));
    ['tensor', 'step', 'max abs', 'max rel', 'worst index', 'tol', 'bitwise', 'ok']
      .forEach(function (h) { head.appendChild(el('th', '', h)); });
    t.appendChild(head);
    tensors.forEach(function (x) {
      var r = el('tr', x.ok === false ? 'notok' : '');
      [x.name, x.step, x.max_abs, x.max_rel, JSON.stringify(x.worst_index), x.tol, x.bitwise,
       x.ok].forEach(function (v) { r.appendChild(el('td', '', v === undefined || v === null ? '' : String(v))); });
      t.appendChild(r);
    });
    d.appendChild(t);
    return d;
  }
  function showDetail(slot) {
    var mine = (detail.applications || {})[slot.getAttribute('data-index')] || {};
    var out = el('div', 'detail-body'), seen = {};
    var outs = mine.rank_outcomes || {};
    Object.keys(outs).forEach(function (k) {
      var diff = outs[k].diff;
      if (!diff) return;
      if (seen[diff] !== undefined) { seen[diff].push(k); return; }
      seen[diff] = [k];
    });
    Object.keys(seen).forEach(function (diff) {
      var ranks = seen[diff].map(function (k) {
        return outs[k].rank !== undefined ? outs[k].rank : k;
      });
      out.appendChild(diffBlock((ranks.length > 1 ? 'ranks ' : 'rank ') + ranks.join(', ') +
                                ': op-level diff (' + diff.split('\n').length + ' lines)', diff));
    });
    var checks = mine.checks || {};
    Object.keys(checks).forEach(function (k) {
      out.appendChild(tableBlock('numeric table of check ' + k + ' (' +
                                 checks[k].tensors.length + ' tensors)', checks[k].tensors));
    });
    slot.innerHTML = '';
    slot.appendChild(out);
  }
  document.addEventListener('click', function (ev) {
    var b = ev.target.closest && ev.target.closest('button.load-detail');
    if (!b) return;
    var slot = b.closest('.detail-slot');
    b.disabled = true;
    b.textContent = 'loading detail.js\u2026';
    withDetail(function () { showDetail(slot); }, function () {
      b.disabled = false;
      b.textContent = 'detail.js did not load (is it beside this page?)';
    });
  });

  if (params.get('q')) text.value = params.get('q');
  if (params.get('v')) {
    var wanted = params.get('v').split(',');
    boxes.forEach(function (b) { b.checked = wanted.indexOf(b.value) >= 0; });
  }
  if (params.get('unexpected') === '1') onlyUnexpected.checked = true;

  text.addEventListener('input', apply);
  boxes.forEach(function (b) { b.addEventListener('change', apply); });
  onlyUnexpected.addEventListener('change', apply);
  window.addEventListener('hashchange', openTarget);
  window.addEventListener('resize', measure);
  measure();
  apply();
  showInitial();
  document.body.dataset.ready = '1';
})();
