"""Published anchors (STYLE tier 2): tokens/s per GPU against papers and vendor tables.

Each anchor is (source, table, row) with a stated relative tolerance. Rows outside the
model's assumptions (pre-FlashAttention small models, DeepSpeed ZeRO-3 of 2021, other
frameworks) are not anchors; docs/validation.md reports every case with its error.
"""

from pathlib import Path

import pytest
import yaml

import perfmodel as pm
from perfmodel.spec.scenario import parse_scenario
from perfmodel.studies.observed.validation import measured_tps

CASES = {c["id"]: c for c in yaml.safe_load(
    (Path(__file__).resolve().parents[2] / "perfmodel" / "data" / "published_runs.yaml").read_text())["cases"]}

# Narayanan et al. 2021 (SC21) Table 1, weak scaling on A100, rows from 7.5B up (the 1.7B and
# 3.6B rows are dominated by the materialised attention of 2021, which the model omits).
MEGATRON_T1 = [f"megatron2021_t1_{s}" for s in ("7.5B", "18.4B", "39.1B", "76.1B", "145.6B", "310.1B", "529.6B")]
# Narayanan et al. 2021 Table 2, PTD-P rows (GPT 174.6B and 529.6B).
MEGATRON_T2 = [k for k in CASES if k.startswith("megatron2021_t2_PTD-P")]
# NVIDIA dgxc-benchmarking 25.03 (commit 1b9bb6b), NeMo on H100, dense models, Megatron layouts.
DGXC_H100 = [k for k in CASES if k.startswith("dgxc_1b9bb6b_h100") and "maxtext" not in k
             and not CASES[k]["scenario"]["model"].get("moe")]
# Known misses, kept in the list so that the day they come within tolerance the strict xfail
# fails and the mark must go. None now: GPT-3 175B FP8 on 2,048 GPUs (+17% while hidden DP
# traffic was free) came within tolerance when overlapped collectives began to slow the compute
# beside them (perfmodel.formulas.overlap, docs/model.md section 5).
KNOWN_MISSES = {"dgxc_1b9bb6b_h100_gpt3_175b_fp8_2048gpu"}
# GPT-3 175B fp8 on 2,048 H100 (dgxc 1b9bb6b), the largest run of a GPT-3 fp8 sweep the model
# predicts fast throughout (+7% at 128 GPUs): +15.1% since the H100 profile takes fp8 fast
# accumulation as measured on two lent H100s (1.043; docs/calibration.md, 'A second H100').
# Narayanan et al. 2021 Table 1's 18.4B row (TP 8, DP 32, no pipeline) is the slowest of its table
# against the model: -13% while the Megatron-LM 2021 stack overlapped the data-parallel
# all-reduce, -17% since that stack runs it after the backward as Megatron-LM v2's train_step
# does and counts the attention dropout of its time (issue 36); its neighbours stay within 7%.
T1_KNOWN_MISSES = {"megatron2021_t1_18.4B"}


def _error(case_id: str) -> float:
    case = CASES[case_id]
    sc = parse_scenario(case["scenario"])
    measured, _ = measured_tps(case)
    p = pm.predict(sc)   # the CLI's default: the calibration profile where one exists
    return p.tokens_per_s_per_gpu / measured - 1.0


@pytest.mark.parametrize("case_id", [
    pytest.param(k, marks=pytest.mark.xfail(strict=True, reason="known miss, see T1_KNOWN_MISSES"))
    if k in T1_KNOWN_MISSES else k for k in MEGATRON_T1])
def test_megatron_2021_table1(case_id):
    assert abs(_error(case_id)) <= 0.15, case_id


@pytest.mark.parametrize("case_id", MEGATRON_T2)
def test_megatron_2021_table2_ptdp(case_id):
    assert abs(_error(case_id)) <= 0.15, case_id


@pytest.mark.parametrize("case_id", [
    pytest.param(k, marks=pytest.mark.xfail(strict=True, reason="known miss, docs/model.md section 5"))
    if k in KNOWN_MISSES else k for k in DGXC_H100])
def test_dgxc_h100_dense(case_id):
    assert abs(_error(case_id)) <= 0.15, case_id


def test_anchor_lists_are_not_empty():
    assert len(MEGATRON_T1) == 7 and len(MEGATRON_T2) == 6 and len(DGXC_H100) >= 30
