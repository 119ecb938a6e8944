"""Three more paddleformers 1.2.0 families at tiny configs (1 layer, hidden
16, 2 heads, vocab 32), each with a tensor-parallel plan written here (none
of them ships an ``auto_dist_config``), keyed by the model's sublayer names:
column-parallel for the projections into the heads and the MLP's up
projections, row-parallel for the projections out, the LM head
column-parallel, the embedding column-parallel with its output gathered
(as LLaMA's own plan does).

* Phi-3 (``Phi3ForCausalLM``): fused ``qkv_proj`` and ``gate_up_proj``;
* Gemma 3 text (``Gemma3ForCausalLM``): fused ``qkv_proj`` and
  ``up_gate_proj``, q/k norms, four norms per layer, scaled embedding;
* GPT-OSS (``GptOssForCausalLM``), a mixture of experts: 4 experts, top-2
  router; attention tensor-parallel, the experts replicated.

Qwen2/Qwen3 and their MoE variants build through a ``ModelProvider`` that
needs the separate ``paddlefleet`` package on 1.2.0 (``ImportError``), and
``Qwen3MoeForCausalLMDeprecated`` does not import: not in the zoo.
"""
from __future__ import annotations

from paddleformers_cpu import config
from zoo_common import VOCAB

TINY = dict(vocab_size=VOCAB, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
            num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
            tie_word_embeddings=False)


def make_phi3():
    from paddleformers.transformers import Phi3Config, Phi3ForCausalLM

    return Phi3ForCausalLM(config(Phi3Config, **TINY))


def make_gemma3():
    from paddleformers.transformers import Gemma3ForCausalLM, Gemma3TextConfig

    return Gemma3ForCausalLM(config(Gemma3TextConfig, **TINY, head_dim=8))


def make_gpt_oss():
    from paddleformers.transformers import GptOssConfig, GptOssForCausalLM

    return GptOssForCausalLM(config(GptOssConfig, **TINY, head_dim=8, num_local_experts=4,
                                    num_experts_per_tok=2))


def tp_plan(column, row):
    """``plan_of(model, mesh)`` placing ``model.layers.*.<column>`` column-
    and ``model.layers.*.<row>`` row-parallel, plus the embedding and head."""
    def plan_of(model, mesh):
        import paddle.distributed as dist

        plan = {"model.embed_tokens": dist.ColWiseParallel(gather_output=True),
                "lm_head": dist.ColWiseParallel()}
        plan.update({f"model.layers.*.{n}": dist.ColWiseParallel() for n in column})
        plan.update({f"model.layers.*.{n}": dist.RowWiseParallel() for n in row})
        return plan
    return plan_of
