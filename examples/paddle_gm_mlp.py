"""Paddle's gradient-merge pass test, in this suite's model-file form, on one
rank: ``test/auto_parallel/gradient_merge_pass_unittest.py`` trains with
``strategy.gradient_merge`` (``k_steps`` 4, ``avg``) and AdamW and compares
the losses with the merge off.  Its model is the GPT of ``get_gpt_model.py``;
here the ``DemoNet`` MLP of ``paddle_demo_net_mp.py`` (on a one-rank mesh
its shardings are trivial) with AdamW, without the test's
``ClipGradByGlobalNorm``.  The planner merges (its
``auto_parallel_gradient_merge_pass``), so the final program already holds
the accumulators, the 1/k scales and the merged AdamW step.

    python -m verify plan examples/paddle_gm_mlp.py --ir pir --ranks 1 --out /tmp/gm_mlp
"""
import os
import sys

import paddle

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gradient_merge_of import merged  # noqa: E402

merged("paddle_demo_net_mp.py", globals(), k_steps=4, avg=True, batch=8)


def optimizer(parameters):
    return paddle.optimizer.AdamW(learning_rate=0.01, parameters=parameters)
