"""``planner_dp_mlp.py`` (two linears and a ReLU: no q/k/v projections, no
gate/up pair) planned with ``FLAGS_enable_fused_ffn_qkv_pass`` on: the
fusion's pattern absent (``examples/fused_ffn_qkv_of.py``)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fused_ffn_qkv_of import with_fusion  # noqa: E402

with_fusion("planner_dp_mlp.py", globals())
