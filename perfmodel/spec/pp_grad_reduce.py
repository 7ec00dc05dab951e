"""Where a pipeline stage's data-parallel gradient reduction runs: one frozen record per
implementation, looked up by name (``SoftwareStack.pp_grad_reduce``). Only layouts with
pp > 1 and a data-parallel group of two or more ask for it.

``overlapped``
    Megatron-Core's: each bucket's reduce-scatter is launched as the last micro-batch's
    backward produces it and hides behind the rest of that backward (``overlap_grad_reduce``;
    ``perfmodel.formulas.overlap``, the dp window); the gradients accumulate in the
    contiguous ``main_grad`` buffer, which is the reduce-scatter's input (no copy).
``stage_drain``
    torch.distributed.pipelining with FSDP2 stages (torchtitan's 3D and 4D runs), from its
    FSDP support (2024) until pytorch/pytorch #165106 (2025-10, "[PP] move FSDP reduce scatters
    to end of step"). ``stage.py`` ``backward_maybe_with_nosync`` runs every backward with
    ``set_requires_gradient_sync(False)``; after the stage's last backward it calls each FSDP
    group's ``post_backward`` by hand (``run_post_backward``). Each call copies the group's
    gradients into the reduce-scatter input (``foreach_reduce``) and first makes the compute
    stream wait for the previous group's reduce-scatter (``_fsdp_param_group.py``
    ``post_backward``: ``current_stream().wait_event(reduce_scatter_state.event)``, FSDP2's one
    reduce-scatter buffer in flight). The schedule issues the stage's input-gradient send only
    after that (``Schedule1F1B`` and ``PipelineScheduleMulti`` cooldown: ``backward_one_chunk``,
    then ``get_bwd_send_ops``), so the stage upstream waits for the reductions before its own
    last backward: every virtual stage's reduction lies on the drain's critical path, in turn
    (PR #165106: "The reduce scatter compute stream sync blocks the other stages from executing
    their backwards leading to bubbles"). Until then FSDP2 keeps the unsharded gradients and
    accumulates them in its ``reduce_dtype`` on the compute stream after every micro-batch's
    backward (``_fsdp_param.py``: ``to_accumulated_grad_if_needed`` casts the first,
    ``accumulate_unsharded_grad_if_needed`` adds each later one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from perfmodel.spec.errors import InputError

PpGradReduceName = Literal["overlapped", "stage_drain"]
PP_GRAD_REDUCE_CHOICES: tuple[str, ...] = get_args(PpGradReduceName)


@dataclass(frozen=True)
class PpGradReduce:
    """One implementation: every property the step asks of it."""

    name: str
    source: str
    in_drain: bool
    """Each virtual stage reduces after its last backward, and its last input-gradient send
    waits for it: the reductions run one after another in the pipeline drain, none hidden."""
    accumulates_unsharded: bool
    """The unsharded gradients are accumulated in the reduce type after every micro-batch's
    backward, on the compute stream, and copied into the reduce-scatter input at the end."""


PP_GRAD_REDUCES: dict[str, PpGradReduce] = {
    "overlapped": PpGradReduce(
        name="overlapped", source="Megatron-Core overlap_grad_reduce: bucketed reduce-scatter behind the last backward",
        in_drain=False, accumulates_unsharded=False),
    "stage_drain": PpGradReduce(
        name="stage_drain",
        source=("torch.distributed.pipelining stage.py backward_maybe_with_nosync (run_post_backward after the last "
                "backward) with FSDP2 _fsdp_param_group.py post_backward; pytorch/pytorch #165106"),
        in_drain=True, accumulates_unsharded=True),
}


def pp_grad_reduce(name: str) -> PpGradReduce:
    """The record of ``name``."""
    try:
        return PP_GRAD_REDUCES[name]
    except KeyError:
        raise InputError("software.pp_grad_reduce",
                         f"unknown pp_grad_reduce {name!r}; choose one of {', '.join(PP_GRAD_REDUCES)}") from None
