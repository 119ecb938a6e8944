"""Four gloo processes building fleet's dp2 x mp2 hybrid group the way the
c_embedding model files do (``examples/c_embedding_of.py``'s
``hybrid_group``), each writing when it enters and leaves every group's
rendezvous (``tests/test_gloo_hybrid_rendezvous.py``).

    python tests/gloo_hybrid_ranks.py OUT_DIR serialize|paddle    (the launcher)

The launcher is the ranks' parent, so each run rendezvouses on ports of its
own (``c_embedding_of._own_ports``).  It waits ``LIMIT`` s, then kills the
ranks still running (Paddle's own group creation can hang in gloo for 170 s).
"""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

WORLD, LIMIT = 4, 90.0
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def launch(out: Path, mode: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    procs = []
    for r in range(WORLD):
        env = {k: v for k, v in os.environ.items() if not k.startswith("PADDLE_")}
        env.update(PADDLE_TRAINER_ID=str(r), PADDLE_TRAINERS_NUM=str(WORLD))
        procs.append(subprocess.Popen([sys.executable, __file__, str(out), mode, str(r)],
                                      env=env, stdout=open(out / f"rank{r}.out", "w"),
                                      stderr=subprocess.STDOUT))
    end = time.time() + (LIMIT if mode == "serialize" else 25.0)
    while time.time() < end and any(p.poll() is None for p in procs):
        time.sleep(0.5)
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()
    (out / "exit.json").write_text(json.dumps([p.returncode for p in procs]))


def rank(out: Path, mode: str, r: int) -> None:
    sys.path.insert(0, str(EXAMPLES))
    from c_embedding_of import hybrid_group

    log = open(out / f"rank{r}.events", "a")
    calls = []  # every rank calls new_group for every group in one order: the n-th call

    def trace(event, ranks):
        if event == "enter":
            calls.append(ranks)
        log.write(json.dumps([time.time(), event, len(calls), sorted(ranks or [])]) + "\n")
        log.flush()

    hybrid_group(serialize=(mode == "serialize"), trace=trace)
    import paddle.distributed as dist

    dist.barrier()  # rank 0 holds the store: nobody leaves while another still needs it


if __name__ == "__main__":
    if len(sys.argv) == 3:
        launch(Path(sys.argv[1]), sys.argv[2])
    else:
        rank(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]))
