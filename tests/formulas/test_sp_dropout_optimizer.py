"""Sequence parallelism's backward re-gather, attention dropout in the unfused path and the
foreach optimizer, each by hand."""

import numpy as np
import pytest
from support import sw

from perfmodel.engine.block import block_time
from perfmodel.engine.evaluate import _layer_time
from perfmodel.engine.rules import resolve
from perfmodel.formulas import overheads
from perfmodel.formulas.comm import Collective, group_time_s
from perfmodel.formulas.traffic import sp_regather_s, tp_layer_s
from perfmodel.formulas.workload import LayerKind, layer_ops
from perfmodel.spec.scenario import parse_scenario

MODEL = dict(name="m", num_layers=4, hidden_size=4096, num_attention_heads=32, ffn_hidden_size=16384,
             gated_mlp=False, vocab_size=32000)


def _resolved(recompute="none", sp=True, **software):
    return resolve(parse_scenario(dict(hardware="h100-sxm", num_gpus=8, model=MODEL, seq_length=4096,
                                       global_batch_size=8, micro_batch_size=1, recompute=recompute,
                                       parallelism=dict(tp=8, sequence_parallel=sp), software=software)))


def test_sp_regather_is_one_all_gather_per_tp_block():
    """A dense layer has two TP blocks (attention, MLP); with SP each backward gathers the
    4096 x 4096 x 2-byte input of its column-parallel GEMM again: 2 x AG(33.5 MB over 8 GPUs)."""
    r = _resolved()
    L, hw, eff = r.layouts, r.job.hardware, r.job.efficiency
    ag = float(group_time_s(Collective.ALL_GATHER, 4096 * 4096 * 2, np.array([8]), 1, hw, eff)[0])
    assert float(sp_regather_s(LayerKind.DENSE, r.job.model, L, 4096, hw, eff, "bf16")[0]) == pytest.approx(2 * ag)
    no_sp = _resolved(sp=False)
    assert float(sp_regather_s(LayerKind.DENSE, r.job.model, no_sp.layouts, 4096, hw, eff, "bf16")[0]) == 0.0


@pytest.mark.parametrize("recompute, regathers", [("none", True), ("selective", True), ("full", False)])
def test_the_backward_exposes_the_regather_unless_the_layer_is_fully_recomputed(recompute, regathers):
    """With the default TP overlap (0: TP collectives in the critical path) the backward's exposed
    TP time is the forward's plus the re-gather; a fully recomputed layer gathered again in its
    recomputed forward (counted in its recompute) and needs none."""
    r = _resolved(recompute=recompute)
    lt = _layer_time(LayerKind.DENSE, r.job, r.layouts, np.zeros(1))
    extra = float(sp_regather_s(LayerKind.DENSE, r.job.model, r.layouts, 4096, r.job.hardware, r.job.efficiency,
                                "bf16")[0])
    fwd_raw = float(tp_layer_s(LayerKind.DENSE, r.job.model, r.layouts, 4096, r.job.hardware, r.job.efficiency,
                               "bf16", r.job.software)[0])
    assert float(lt.tp_fwd_s[0]) == pytest.approx(fwd_raw)
    assert float(lt.tp_bwd_s[0]) == pytest.approx(fwd_raw + (extra if regathers else 0.0))


def test_attention_dropout_adds_five_bytes_per_score_each_way():
    """Unfused attention, 32 / 8 = 4 heads per GPU, s 4096: 4 x 4096 x 4096 = 67.1 M scores; the
    dropout kernel moves 5 bytes per score forward and backward: 335.5 MB, 115.1 us at 3350 GB/s
    x 0.87, plus one kernel overhead (5.6 us) each way."""
    r = _resolved()
    L, m, hw, eff = r.layouts, r.job.model, r.job.hardware, r.job.efficiency

    def core(stack):
        blk = block_time(layer_ops(m, LayerKind.DENSE, stack), m, L, 4096, "bf16", hw, eff, stack)
        return next(t for t in blk.ops if t.name == "attention/core")
    plain, dropped = core(sw(flash=False)), core(sw(flash=False, attention_dropout=True))
    expected = 5.6e-6 + 5 * 4 * 4096 * 4096 / (3350e9 * 0.87)
    assert float(dropped.fwd_s[0] - plain.fwd_s[0]) == pytest.approx(expected, rel=1e-9)
    assert float(dropped.bwd_s[0] - plain.bwd_s[0]) == pytest.approx(expected, rel=1e-9)
    assert expected * 1e6 == pytest.approx(120.7, abs=0.1)
    flash = core(sw())
    assert float(core(sw(attention_dropout=True)).fwd_s[0]) == float(flash.fwd_s[0])   # fused into flash


def test_foreach_adamw_moves_84_bytes_per_parameter():
    """1e9 parameters on a GPU at 3350 GB/s x 0.87: fused 30 GB in 10.29 ms, foreach 84 GB in
    28.82 ms."""
    bw = 3350e9 * 0.87
    assert float(overheads.optimizer_s(1e9, bw, sw())) == pytest.approx(30e9 / bw)
    assert float(overheads.optimizer_s(1e9, bw, sw(optimizer_kernels="foreach"))) == pytest.approx(84e9 / bw)
    assert 84e9 / bw * 1e3 == pytest.approx(28.82, abs=0.01)
