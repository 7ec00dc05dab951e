"""Precision: one frozen record per training precision mode, with the bytes of each role.

A mode names a format for each role a number plays in training: the GEMMs' compute format
(whose dense peak ``perfmodel.spec.hardware`` gives), the parameters the model computes with,
their gradients, the fp32 master copy (or none), the two Adam moments, the GEMM inputs saved
for the backward, and the elements the sequence-parallel and parameter all-gathers move.
``FORMAT_BYTES`` is the one table of bytes per element; every byte count of a role is a
format looked up there.

The scenario's ``precision`` (bf16, fp16, fp8, fp4; contract ``scenario.md``) names one of
``SCENARIO_MODES``; ``PRESETS`` adds the modes real runs use, each with its source. The
software stack still adjusts two roles per job (``grad_reduce_in_fp32``,
``optimizer_moments``: ``perfmodel.formulas.model_states.stack_state_bytes_per_param``) and
picks the fp8 scaling recipe (``fp8_scaling``) where a mode leaves it to the stack.

=====================  ======  =====  ======  =======  ===========  ================
mode                   param   grad   master  moments  state bytes  source
=====================  ======  =====  ======  =======  ===========  ================
bf16 (Megatron)        2       4      4       4 + 4    18           Megatron-Core distributed optimizer docs
fp16 (Megatron)        2       2      4 (+4)  4 + 4    20           ibid. (fp32 main grad in the optimizer)
zero-mixed             2       2      4       4 + 4    16           Rajbhandari et al. 2020 sec. 3.1 (16 psi)
pytorch-amp            4       4      -       4 + 4    16           PyTorch AMP (fp32 params under autocast)
pure-bf16              2       2      -       2 + 2    8            bf16 params and AdamW states
bf16-moments           2       2      4       2 + 2    12           Megatron-Core precision-aware optimizer
fp8-primary-weights    1       4      4       4 + 4    17           TE fp8_model_init; Megatron --fp8-param-gather
=====================  ======  =====  ======  =======  ===========  ================
"""

from __future__ import annotations

from dataclasses import dataclass

from perfmodel.spec.errors import InputError

FORMAT_BYTES: dict[str, float] = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "fp4": 0.5}
"""Bytes per element of each number format (IEEE 754 binary32 and binary16, bfloat16, OCP
FP8 E4M3/E5M2, OCP MX FP4 E2M1 without its shared scale)."""
ADAM_MOMENTS = 2
"""Adam keeps two moments per parameter, m and v (Kingma & Ba 2015, Algorithm 1)."""


@dataclass(frozen=True)
class Precision:
    """One precision mode: the format of each role (a key of ``FORMAT_BYTES``; None = none)."""

    name: str
    source: str
    compute: str
    """The GEMMs' format: the dense peak they run at (bf16, fp16, fp8, fp4)."""
    param: str = "bf16"
    """The parameters the model computes with (and the distributed optimizer / FSDP gathers)."""
    grad: str = "fp32"
    """The gradient buffer, accumulated and reduced in this format."""
    master: str | None = "fp32"
    """The master copy the optimizer updates; None where the parameters are their own."""
    moments: str = "fp32"
    """Each Adam moment (m and v)."""
    optimizer_grad_copy: str | None = None
    """A gradient copy the optimizer keeps (Megatron fp16: the fp32 main gradient)."""
    saved_gemm_input: str = "bf16"
    """A GEMM input kept for the weight-gradient GEMM (Transformer Engine saves the quantised
    input under fp8, and an fp8/MX copy under NVFP4)."""
    gather: str = "bf16"
    """The sequence-parallel all-gather of a layer input (TE casts it to fp8 before the gather)."""
    fp8_recipe: str | None = None
    """The fp8 scaling recipe (per-tensor, blockwise, mxfp8); None = the stack's ``fp8_scaling``."""

    @property
    def low_precision(self) -> bool:
        """GEMMs below 16 bits (fp8, fp4): the router and the output layer stay bf16."""
        return FORMAT_BYTES[self.compute] < FORMAT_BYTES["bf16"]

    def bytes_of(self, role: str) -> float:
        """Bytes per element of ``role`` (a field naming a format); 0 where the role is None."""
        fmt = getattr(self, role)
        return 0 if fmt is None else FORMAT_BYTES[fmt]

    @property
    def optimizer_bytes(self) -> float:
        """Optimizer states per parameter: master copy, two moments, any gradient copy."""
        return self.bytes_of("master") + ADAM_MOMENTS * self.bytes_of("moments") + self.bytes_of("optimizer_grad_copy")

    @property
    def state_bytes(self) -> tuple[float, float, float]:
        """(weights, gradients, optimizer states) bytes per parameter."""
        return self.bytes_of("param"), self.bytes_of("grad"), self.optimizer_bytes


_MEGATRON = "Megatron-Core 'Distributed Optimizer' docs (bf16: 18 bytes per parameter, fp16: 20)"
SCENARIO_MODES: dict[str, Precision] = {p.name: p for p in (
    Precision("bf16", _MEGATRON + "; bf16 gradients accumulated and reduced in fp32", compute="bf16"),
    Precision("fp16", _MEGATRON, compute="fp16", param="fp16", grad="fp16", optimizer_grad_copy="fp32"),
    Precision("fp8", "Transformer Engine 'Using FP8' docs: bf16 parameters cast to fp8 per GEMM, the "
              "quantised input saved for the backward", compute="fp8", saved_gemm_input="fp8", gather="fp8"),
    Precision("fp4", "Transformer Engine NVFP4 recipe: an fp8/MX copy kept for the backward", compute="fp4",
              saved_gemm_input="fp8", gather="fp8"),
)}
"""The scenario's ``precision`` values (contract ``scenario.md``), as Megatron-Core runs them."""
LOW_PRECISION: tuple[str, ...] = tuple(name for name, mode in SCENARIO_MODES.items() if mode.low_precision)
"""The scenario precisions whose GEMMs run below 16 bits (fp8, fp4)."""

PRESETS: dict[str, Precision] = {p.name: p for p in (
    Precision("megatron-mixed", _MEGATRON, compute="bf16"),
    Precision("zero-mixed", "Rajbhandari et al. 2020 (ZeRO) sec. 3.1: 2 + 2 + 12 = 16 bytes per parameter (K = 12)",
              compute="bf16", grad="bf16"),
    Precision("pytorch-amp", "PyTorch torch.autocast docs: fp32 parameters, gradients and Adam states, bf16 GEMMs "
              "(Hugging Face Trainer --bf16)", compute="bf16", param="fp32", grad="fp32", master=None),
    Precision("pure-bf16", "bf16 parameters, gradients and AdamW states, no master copy (torchtune "
              "dtype=bf16 fine-tuning)", compute="bf16", grad="bf16", master=None, moments="bf16"),
    Precision("bf16-moments", "Megatron-Core --use-precision-aware-optimizer --main-grads-dtype bf16 "
              "--exp-avg-dtype bf16 --exp-avg-sq-dtype bf16 (DeepSeek-V3 report sec. 3.3.3: bf16 moments)",
              compute="bf16", grad="bf16", moments="bf16"),
    Precision("fp8-per-tensor", "Transformer Engine DelayedScaling / Float8CurrentScaling", compute="fp8",
              saved_gemm_input="fp8", gather="fp8", fp8_recipe="per-tensor"),
    Precision("fp8-blockwise", "DeepSeek-V3 report sec. 3.3.1: 1x128 activation tiles, 128x128 weight blocks "
              "(TE Float8BlockScaling)", compute="fp8", saved_gemm_input="fp8", gather="fp8", fp8_recipe="blockwise"),
    Precision("mxfp8", "OCP Microscaling v1.0; TE MXFP8BlockScaling (1x32 blocks, E8M0 scales)", compute="fp8",
              saved_gemm_input="fp8", gather="fp8", fp8_recipe="mxfp8"),
    Precision("fp8-primary-weights", "TE fp8_model_init; Megatron-Core --fp8-param-gather: fp8 parameters, "
              "fp32 master", compute="fp8", param="fp8", saved_gemm_input="fp8", gather="fp8", fp8_recipe="per-tensor"),
)}
"""Named modes of real runs, each with its source (not scenario values)."""


def precision_mode(name: str) -> Precision:
    """The record of a scenario precision or a preset; a one-line InputError otherwise."""
    found = SCENARIO_MODES.get(name) or PRESETS.get(name)
    if found is None:
        raise InputError("precision", f"{name!r} is not one of {', '.join([*SCENARIO_MODES, *PRESETS])}")
    return found
