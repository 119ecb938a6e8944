"""The PIR Engine's AMP (bfloat16, O1) on ``planner_amp_no_white.py``, a
model with no op on the white list (layer norm, tanh, elementwise scale and
shift, a mean), set through ``configure`` (``examples/amp_of.py``, planned as
on a GPU).  The AMP rewrite's pattern is absent: the serial program must
hold no cast and no bfloat16 value (``passes/pir_amp.py``: left alone),
whose reference is the same model planned without AMP.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from amp_of import with_amp  # noqa: E402

with_amp("planner_amp_no_white.py", globals(), dtype="bfloat16", level="O1")
