"""A rank's watched values under another rank's names.

The relation assembles a partial (or compares a replicated) value of rank
``r`` from every rank's piece of it.  Value names (``%12``) are per program:
ranks whose programs differ (a sub-mesh's ranks keep other ops) give one
name to different values, so rank ``q``'s piece of ``r``'s loss is not
``q``'s value named as ``r``'s loss.  The relation tables name, per rank,
the loss, each parameter's gradient and its state after the step; through
them :func:`peer_view` shows ``q``'s values under ``r``'s names.
"""
from __future__ import annotations


def watched_names(rel: dict) -> dict:
    """``{label: value name}`` of a rank's relation table: the loss, each
    parameter's gradient and its state after the step."""
    out = {}
    if rel.get("loss"):
        out["loss"] = rel["loss"]
    for pname, p in rel.get("params", {}).items():
        out[f"{pname}@GRAD"] = p["grad"]
        out[pname] = p["param"]
    return {k: v for k, v in out.items() if v}


def peer_view(values: dict, rel_q: dict, rel_r: dict) -> dict:
    """Rank ``q``'s ``values`` (``{name: value}``) seen by rank ``r``: each name
    ``r``'s table gives a watched value (and its ``@micro<i>`` copies) holds
    ``q``'s value of the same label, or nothing when ``q`` has none; every
    other name is ``q``'s own."""
    mine, theirs = watched_names(rel_r), watched_names(rel_q)
    view = dict(values)
    suffixes = {""} | {n[len(base):] for base in theirs.values() for n in values
                       if n.startswith(base + "@micro")}
    for rn in mine.values():
        for s in suffixes:
            view.pop(rn + s, None)
    for label, rn in mine.items():
        qn = theirs.get(label)
        for s in suffixes:
            if qn is not None and qn + s in values:
                view[rn + s] = values[qn + s]
    return view
