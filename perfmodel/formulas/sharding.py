"""How many parameters each GPU holds for compute (before ZeRO sharding of model states).

The split of one layer over tp and ep * etp is ``model_states.layer_params_per_gpu``; this module
spreads layers over pipeline stages for the communication and optimizer terms. Layers are spread evenly
over pp stages (l / pp each; recipes with uneven first/last stages balance the embedding and
the output layer). The embedding sits on the first stage and the output layer (plus MTP
modules) on the last, both split over tp (vocabulary parallel). Under DualPipe a rank holds
two stages (``perfmodel.formulas.pipeline.parameter_copies``); the V schedules put the first
and the last stage on rank 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfmodel.formulas.counts import embedding_params, output_params
from perfmodel.formulas.layouts import Layouts
from perfmodel.formulas.model_states import layer_params_per_gpu
from perfmodel.formulas.pipeline import only_defaults, parameter_copies, schedule_property
from perfmodel.formulas.scalars import filled, floats, maximum, where
from perfmodel.formulas.workload import LayerKind, layer_kinds, mtp_extra_ops, mtp_layer_kind
from perfmodel.spec.model import ModelSpec


def _layer_split_params(model: ModelSpec, kind: LayerKind, layouts: Layouts):
    """(dense-per-GPU, expert-per-GPU) parameters of one layer of this kind (``memory`` owns the split)."""
    return layer_params_per_gpu(model, kind, layouts.tp, layouts.ep, layouts.etp)


@dataclass(frozen=True)
class StageParams:
    """Parameters per GPU on the first, a middle and the last pipeline stage."""

    first_dense: np.ndarray
    middle_dense: np.ndarray
    last_dense: np.ndarray
    per_stage_expert: np.ndarray
    last_expert: np.ndarray

    def max_dense(self):
        return maximum(maximum(self.first_dense, self.middle_dense), self.last_dense)

    def max_expert(self):
        return maximum(self.per_stage_expert, self.last_expert)


def stage_params(model: ModelSpec, layouts: Layouts, by_schedule: bool) -> StageParams:
    """``by_schedule``: place the stages as each layout's pipeline schedule does (False: as 1F1B,
    for batches whose layouts all run 1F1B or interleaving, without reading their schedule)."""
    pp = floats(layouts.pp)
    kinds = layer_kinds(model)
    n_dense_layers = sum(1 for k in kinds if k is LayerKind.DENSE)
    n_moe_layers = len(kinds) - n_dense_layers
    d_dense, _ = _layer_split_params(model, LayerKind.DENSE, layouts)
    per_stage_dense = d_dense * n_dense_layers / pp
    per_stage_expert = filled(pp, 0.0)
    if n_moe_layers:
        d_moe, e_moe = _layer_split_params(model, LayerKind.MOE, layouts)
        per_stage_dense = per_stage_dense + d_moe * n_moe_layers / pp
        per_stage_expert = e_moe * n_moe_layers / pp
    tp = floats(layouts.tp)
    emb = embedding_params(model) / tp
    out = output_params(model) / tp
    mtp_dense = filled(pp, 0.0)
    mtp_expert = filled(pp, 0.0)
    if model.mtp_layers:
        d, e = _layer_split_params(model, mtp_layer_kind(model), layouts)
        extra = sum(op.params for op in mtp_extra_ops(model))
        mtp_dense = model.mtp_layers * (d + extra)
        mtp_expert = model.mtp_layers * e
    # DualPipe: every rank holds two stages, r and p - 1 - r, so the end ranks hold both ends;
    # a V ends where it starts (rank 0 holds the embedding and the head)
    single = pp == 1
    if by_schedule and not only_defaults(layouts.schedule):
        copies = parameter_copies(layouts.schedule)
        per_stage_dense, per_stage_expert = copies * per_stage_dense, copies * per_stage_expert
        single = single | schedule_property(layouts.schedule, "first_and_last_on_one_rank")
    first = per_stage_dense + emb + where(single, out + mtp_dense, 0.0)
    last = per_stage_dense + out + mtp_dense + where(single, emb, 0.0)
    if model.tied_embeddings:
        last = last + where(single, 0.0, emb)   # the last stage keeps its own copy to tie
    return StageParams(first_dense=first, middle_dense=per_stage_dense, last_dense=last,
                       per_stage_expert=per_stage_expert, last_expert=per_stage_expert + mtp_expert)
