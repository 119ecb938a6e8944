(function () {
  var text = document.getElementById('filter-text');
  var boxes = Array.prototype.slice.call(document.querySelectorAll('input.vfilter'));
  var onlyUnexpected = document.getElementById('only-unexpected');
  var cells = Array.prototype.slice.call(document.querySelectorAll('a.app-ref'));
  var rows = Array.prototype.slice.call(document.querySelectorAll('tr.mrow'));
  var apps = Array.prototype.slice.call(document.querySelectorAll('details.app'));
  var groups = Array.prototype.slice.call(document.querySelectorAll('div.passgroup'));
  var count = document.getElementById('shown-count');

  function keep(el, q, verdicts) {
    var v = el.getAttribute('data-verdict');
    if (verdicts.indexOf(v) < 0) return false;
    if (onlyUnexpected.checked && el.getAttribute('data-unexpected') !== '1') return false;
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
    var h = document.getElementById('controls').offsetHeight;
    document.documentElement.style.setProperty('--controls-h', h + 'px');
  }

  function openTarget() {
    var id = decodeURIComponent(location.hash.slice(1));
    var el = id && document.getElementById(id);
    if (el && el.tagName === 'DETAILS') {
      el.open = true;
      el.classList.remove('filtered');
      var g = el.closest('div.passgroup');
      if (g) g.classList.remove('filtered');
      el.scrollIntoView();
    }
  }

  var params = new URLSearchParams(location.search);
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
  openTarget();
  document.body.dataset.ready = '1';
})();
