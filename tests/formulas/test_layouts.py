"""dp, the micro-batch count and the expert data-parallel group: one home each
(``perfmodel.formulas.layouts``), by hand."""

from __future__ import annotations

from perfmodel.formulas.layouts import layouts_for


def test_sizes_by_hand():
    # 1024 GPUs, tp 8, pp 4, cp 2: dp = 1024 / 64 = 16; B = 512, b = 2: m = 512 / 32 = 16;
    # experts: dp * cp * tp = 256 ranks as ep 32 * etp 1 * edp 8
    L = layouts_for(1024, 512, tp=[8], pp=[4], vpp=[1], cp=[2], ep=[32], etp=[1], sp=[True], zero_stage=[1],
                    mbs=[2])
    assert (int(L.dp[0]), int(L.num_mb[0]), int(L.edp[0])) == (16, 16, 8)
