"""fleet's dp2 x mp2 hybrid group over gloo, as the c_embedding model files
build it (``examples/c_embedding_of.py``): 3.3.1's ``ProcessGroupGloo``
rendezvouses under keys named by the group rank alone, so two groups whose
rendezvous overlap read each other's addresses.  The model files create
the groups one at a time; Paddle's own order lets ``[0, 2]`` and ``[1, 3]``
(dp) rendezvous at once (the broken twin: the overlap is seen, and the run
is stopped, as it may hang in gloo for 170 s)."""
import json
import subprocess
import sys
from pathlib import Path


HELPER = Path(__file__).resolve().parent / "gloo_hybrid_ranks.py"


def _run(tmp_path, mode):
    subprocess.run([sys.executable, str(HELPER), str(tmp_path), mode], check=True,
                   timeout=180)
    exits = json.loads((tmp_path / "exit.json").read_text())
    windows = {}  # (n-th group, its ranks) -> [first enter, last leave, members inside]
    for f in sorted(tmp_path.glob("rank*.events")):
        for t, event, nth, ranks in map(json.loads, f.read_text().splitlines()):
            if len(ranks) < 2:
                continue
            w = windows.setdefault((nth, tuple(ranks)), [t, t, 0])
            w[0] = min(w[0], t)
            if event == "enter":
                w[2] += 1
            else:
                w[2] -= 1
                w[1] = max(w[1], t)
    spans = {g: (w[0], w[1] if w[2] == 0 else float("inf")) for g, w in windows.items()}
    overlaps = [(a, b) for a in spans for b in spans if a < b and
                spans[a][0] < spans[b][1] and spans[b][0] < spans[a][1]]
    return exits, spans, overlaps


def test_groups_rendezvous_one_at_a_time(tmp_path):
    exits, spans, overlaps = _run(tmp_path, "serialize")
    assert exits == [0, 0, 0, 0], [(tmp_path / f"rank{r}.out").read_text()[-2000:]
                                   for r in range(4)]
    assert {(0, 2), (1, 3), (0, 1), (2, 3)} <= {g for _, g in spans}  # dp and mp groups
    assert overlaps == [], overlaps


def test_paddle_order_overlaps_twin(tmp_path):
    """Without the barrier the dp groups rendezvous at once: the overlap the
    unprefixed keys cannot tell apart."""
    _, spans, overlaps = _run(tmp_path, "paddle")
    assert any(a[1] == (0, 2) and b[1] == (1, 3) for a, b in overlaps), spans


