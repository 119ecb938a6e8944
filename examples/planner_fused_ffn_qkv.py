"""``fused_ffn_qkv_net.py`` planned with ``FLAGS_enable_fused_ffn_qkv_pass``
on (``examples/fused_ffn_qkv_of.py``: the fusion recorded into the rank's
folder as ``fusion.json``)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fused_ffn_qkv_of import with_fusion  # noqa: E402

with_fusion("fused_ffn_qkv_net.py", globals())
