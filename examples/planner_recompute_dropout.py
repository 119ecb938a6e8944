"""``planner_tp2_recompute.py`` with a dropout (p 0.5) after the relu, inside
the recomputed block: the engine's ``auto_parallel_recompute_pir`` clones the
dropout into the backward with no seed tensor and ``fix_seed`` False, so the
recomputed dropout draws a new mask and ``dropout_grad`` reads it, not the
forward's (3.3.1; ``tests/test_recompute_pir.py``).  Not a built-in case: a
dropout's masks differ between the serial program and the ranks' pieces
anyway, so the relation has nothing to say; the pass's contract does."""
import importlib.util
import os

_spec = importlib.util.spec_from_file_location(
    "_recompute_base", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                    "planner_tp2_recompute.py"))
_base = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_base)
_base.DROPOUT = 0.5

build_model, loss, optimizer, configure = (_base.build_model, _base.loss, _base.optimizer,
                                           _base.configure)
inputs, labels, BATCH = _base.inputs, _base.labels, _base.BATCH
