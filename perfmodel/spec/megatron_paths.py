"""Which of Megatron-Core's fused or eager code paths run the parts of a layer that only some
models have: a rotary embedding other than plain RoPE, linear biases, a clamped gated activation.

Three software options, part of ``perfmodel.spec.software.SoftwareStack`` (which inherits them
from ``MegatronPaths``; they live here to keep that module small). Each default is Megatron-Core's
own path for a model without the feature, so a model without it is priced as before; a job states
the path its recipe takes. What each path costs is ``perfmodel.formulas.megatron_eager``.
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
