"""Which of Megatron-Core's fused or eager code paths run the parts of a layer that only some
models have: a rotary embedding other than plain RoPE, linear biases, a clamped gated activation;
and whether its routed experts pad their rows for a low-precision grouped GEMM.

Six software options, part of ``perfmodel.spec.software.SoftwareStack`` (which inherits them
from ``MegatronPaths``; they live here to keep that module small). Each default is Megatron-Core's
own path for a model without the feature, so a model without it is priced as before; a job states
the path its recipe takes. ``moe_expert_fp8_padding`` is Megatron-Core's path for every MoE model in FP8, on by default; the
presets of other frameworks in ``perfmodel/data/stacks.yaml`` turn it off. What each path costs is ``perfmodel.formulas.megatron_eager``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, StrictBool


class MegatronPaths(BaseModel):
    """Megatron-Core's code paths for rotary embedding, bias addition and the expert MLP."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rotary_fusion: StrictBool = True
    """The rotary embedding runs as one fused kernel (Transformer Engine
    ``fused_apply_rotary_pos_emb``, Megatron-Core ``apply_rope_fusion``), counted with the
    attention path as before; false: Megatron-Core's eager ``_apply_rotary_pos_emb_bshd``
    (``megatron/core/models/common/embeddings/rope_utils.py``), a chain of PyTorch kernels over Q
    and K. Megatron-Bridge's ``GPTModelProvider.provide`` turns the fusion off for every
    ``position_embedding_type`` other than ``rope`` (``utils/fusions.py``
    ``validate_rope_fusion_compatibility``, v0.2.0 to v0.5.0), so GPT-OSS's YaRN runs eager even
    where the performance scripts set ``apply_rope_fusion = True``."""
    bias_dropout_fusion: StrictBool = True
    """The bias, dropout and residual add after the attention output projection (and a dense
    MLP's down projection) run as one fused kernel (Megatron-Core ``bias_dropout_fusion``, default
    true); false: ``bias_dropout_add_unfused`` adds the bias in a kernel of its own
    (``megatron/core/fusions/fused_bias_dropout.py``) and autograd reduces its gradient over the
    tokens. Matters only for a model with ``linear_bias``; GPT-OSS's provider sets it false."""
    moe_te_op_fuser: StrictBool = False
    """The routed experts run as Transformer Engine's fused grouped MLP (Megatron-Core
    ``use_transformer_engine_op_fuser``, TEGroupedMLP ``_with_fused_impl``, Megatron-Core 0.18 with
    TE 2.14+): fc1, the weighted (clamped) activation and fc2 with their biases are TE ops. False
    (Megatron-Core's default, and the only path before 0.18): the clamp of a clamped GLU runs as
    eager PyTorch kernels before the fused activation, and the fc2 bias is added per local expert
    in eager PyTorch (``TEGroupedMLP._apply_bias``). Megatron-Bridge v0.5.0 sets it with
    ``cutedsl_fused_grouped_mlp`` (``scripts/performance/utils/overrides.py``)."""
    moe_expert_fp8_padding: StrictBool = True
    """Megatron-Core's ``TEGroupedMLP`` pads each local expert's rows to the low-precision GEMM's
    alignment (16 rows for FP8, 32 for MXFP8) with Transformer Engine's ``Fp8Padding`` before fc1
    and removes the padding after fc2 with ``Fp8Unpadding`` whenever the precision is FP8 or FP4
    (``transformer/moe/experts.py`` ``TEGroupedMLP.forward``, core_r0.12.0 to core_v0.17.0; TE
    ``pytorch/module/fp8_padding.py`` and ``fp8_unpadding.py``, v2.7 to v2.14): a copy of the
    routed tokens' h-wide input and output each way, skipped only when every count is already a
    multiple (``m_splits == padded_m_splits``). Dropless routing gives such counts almost never,
    so the copies run unless the routing map was padded first (``moe_router_padding_for_quantization``,
    off in Megatron-Core and in every Qwen3, DeepSeek-V3 and Mixtral recipe), the experts are
    padded to capacity, or the dispatcher pads as it permutes (HybridEP with ``pad_multiple``,
    Megatron-Core ``_HybridEPManager``, from the 25.11 container's dev 0.15.0, commit 0d8e071).
    False: no such copies (the presets of frameworks other than Megatron-Core). Priced by
    ``perfmodel.formulas.megatron_eager.fp8_padding_op``."""
    fp8_current_scaling: StrictBool = False
    """fp8 GEMMs scale their inputs by Transformer Engine's per-tensor current scaling
    (``Float8CurrentScaling``, Megatron-Bridge ``bf16_with_fp8_current_scaling_mixed``, the
    performance scripts' ``fp8_cs``): each quantisation reads its input for the amax before the
    cast and runs three kernels, one set per expert in a grouped linear
    (``perfmodel.formulas.fp8_casts.quantisation_cast``). False: delayed scaling, or a
    recipe without the separate amax pass (MXFP8, blockwise), priced as before. Per job: the
    scripts pick the recipe per GPU (H100: ``fp8_cs``; Blackwell: ``fp8_mx``)."""
    fp8_mxfp8: StrictBool = False
    """fp8 GEMMs run Transformer Engine's MXFP8 block scaling (``MXFP8BlockScaling``,
    Megatron-Bridge ``bf16_with_mxfp8_mixed``, the performance scripts' ``fp8_mx`` on Blackwell):
    one quantise kernel per tensor, one per expert in a grouped linear
    (``perfmodel.formulas.fp8_casts.quantisation_cast``; its block scales are not a curve
    of their own). False: priced as before."""
