"""Stage times of a step: the first, a middle and the last pipeline rank, and the slowest one's
components, under the even split of layers or an explicit ``pipeline_layout``
(``perfmodel.spec.pipeline_layout``); ``perfmodel.engine.evaluate`` turns them into the steady
state and the bubble."""

from __future__ import annotations

import numpy as np

from perfmodel.formulas import pipeline
from perfmodel.formulas.layouts import Layouts
from perfmodel.formulas.scalars import maximum, minimum, where
from perfmodel.spec import pipeline_layout


def scaled(parts: dict, factor) -> dict:
    return {k: v * factor for k, v in parts.items()}


def add(*dicts) -> dict:
    out: dict = {}
    for d in dicts:
        for k, v in d.items():
            out[k] = out.get(k, 0.0) + v
    return out


def total(d: dict):
    return sum(d.values())


def even_stages(L: Layouts, middle: dict, head_parts: dict, mtp_parts: dict, num_mtp: int):
    """Even split: every rank l / p layers, the last one also the head and the MTP modules (the
    first, with pp = 1). Returns (StageTimes, components of the slowest rank, sum over ranks)."""
    single = L.pp == 1
    last = add(middle, head_parts, scaled(mtp_parts, num_mtp))
    first = {k: where(single, last[k], middle[k]) for k in last}
    stages = pipeline.StageTimes(first_s=total(first), middle_s=total(middle), last_s=total(last))
    # Components of the slowest stage (first == last when pp == 1).
    slow_is_last = total(last) >= maximum(total(first), where(L.pp > 2, total(middle), 0.0))
    slow_is_first = np.logical_not(slow_is_last) & (total(first) >= total(middle))
    slowest = {k: where(slow_is_last, last[k], where(slow_is_first, first[k], middle[k])) for k in last}
    return stages, slowest, pipeline.sum_stages_s(stages, L.pp)


def layout_stages(stages_text: tuple[str, ...], L: Layouts, per_layer: dict, head_parts: dict, mtp_parts: dict):
    """Stage times under an explicit layout: rank r runs d_r decoder layers (of the average
    kind), m_r MTP modules and l_r output layers. Returns (StageTimes of the first, slowest
    middle and last rank; components of the slowest rank; the sum over ranks)."""
    n = len(L)
    coef = {c: np.zeros((3, n)) for c in ("t", "m", "L")}   # slowest, first, last rank
    mid = {c: np.zeros(n) for c in ("t", "m", "L")}
    rank_sum = {c: np.zeros(n) for c in ("t", "m", "L")}
    layer_s = sum(per_layer.values())
    mtp_s = sum(mtp_parts.values()) if mtp_parts else np.zeros(n)
    head_s = sum(head_parts.values())
    for pp in np.unique(L.pp):
        rows = np.flatnonzero(L.pp == pp)
        load = pipeline_layout.rank_load(stages_text, int(pp))
        two = pipeline_layout.mirrored(load)     # DualPipe: stage r and stage pp - 1 - r on rank r
        dual = pipeline.schedule_property(np.asarray(L.schedule)[rows], "bidirectional")[None, :]
        counts = {c: np.where(dual, b[:, None], a[:, None]) for c, a, b in
                  (("t", load.decoder, two.decoder), ("m", load.mtp, two.mtp), ("L", load.loss, two.loss))}
        # rank totals, (pp, rows)
        t_rank = counts["t"] * layer_s[rows] + counts["m"] * mtp_s[rows] + counts["L"] * head_s[rows]
        slow = np.argmax(t_rank, axis=0)
        inner = t_rank[1:-1] if pp > 2 else np.zeros((1, rows.size))
        mid_rank = 1 + np.argmax(inner, axis=0)
        cols = np.arange(rows.size)
        for key, cnt in counts.items():
            coef[key][0, rows] = cnt[slow, cols]
            coef[key][1, rows] = cnt[0]
            coef[key][2, rows] = cnt[-1]
            mid[key][rows] = np.where(pp > 2, cnt[minimum(mid_rank, pp - 1), cols], 0.0)
            rank_sum[key][rows] = cnt.sum(axis=0)

    def parts(tc, mc, lc):
        return add(scaled(per_layer, tc), scaled(mtp_parts, mc), scaled(head_parts, lc))

    def tot(tc, mc, lc):
        return tc * layer_s + mc * mtp_s + lc * head_s

    slowest = parts(coef["t"][0], coef["m"][0], coef["L"][0])
    st = pipeline.StageTimes(first_s=tot(coef["t"][1], coef["m"][1], coef["L"][1]),
                             middle_s=tot(mid["t"], mid["m"], mid["L"]),
                             last_s=tot(coef["t"][2], coef["m"][2], coef["L"][2]))
    return st, slowest, tot(rank_sum["t"], rank_sum["m"], rank_sum["L"])
