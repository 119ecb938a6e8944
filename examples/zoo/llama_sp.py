"""LLaMA (paddleformers 1.2.0, tiny) at TP2 with sequence parallelism: the
keyed plan plus Paddle's SP markers (``llama.keyed_plan(sequence_parallel=True)``).

    python -m verify plan examples/zoo/llama_sp.py --ir pir --ranks 2 --mesh 1x2 --out DIR

The mesh must have a ``dp`` dim (``1x2``): Paddle's SP markers read its
placement (``tensor_parallel.c_split``: ``dim_names.index("dp")``), a 1-D
``["mp"]`` mesh fails with ``ValueError: 'dp' is not in list``.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the zoo's helpers

import zoo_llama as llama  # noqa: E402
from zoo_common import model_file  # noqa: E402

build_model, loss, optimizer, inputs, labels, BATCH, VOCAB = model_file(
    llama.make_model, lambda m, mesh: llama.keyed_plan(m, mesh, sequence_parallel=True))
