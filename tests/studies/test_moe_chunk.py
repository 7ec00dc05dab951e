"""DeepSeek's published training trace reproduced from its kernels up: one DualPipe chunk pair of
4 DeepSeek-V3 MoE layers on an H800 (EP64, TP1, 4K), perfmodel.studies.observed.moe_chunk against the
figures read from deepseek-ai/profile-data train.json (calibration/data/deepseek_v3_train_trace.yaml,
classification in calibration/deepseek_trace.py)."""

from pathlib import Path

import pytest
import yaml

import perfmodel as pm
from perfmodel.studies.observed.moe_chunk import chunk_pair

ROOT = Path(__file__).resolve().parents[2]
TRACE = yaml.safe_load((ROOT / "calibration" / "data" / "deepseek_v3_train_trace.yaml").read_text())


@pytest.fixture(scope="module")
def predicted():
    sc = pm.load_scenario(ROOT / TRACE["scenario"])
    return chunk_pair(pm.resolve(sc), TRACE["num_layers"]).as_traced()


@pytest.mark.parametrize("key,tolerance", [("gemm", 0.15), ("other", 0.15), ("span", 0.10)])
def test_chunk_pair_against_the_trace(predicted, key, tolerance):
    """GEMMs (both compute streams), the other compute kernels and the span, each within the
    issue's tolerance of the trace."""
    measured_s = TRACE["compare"][f"{key}_ms"] / 1e3
    assert predicted[key] == pytest.approx(measured_s, rel=tolerance)


def test_attention_and_ep_misses_are_the_known_ones(predicted):
    """Not within 15% yet, and said so (docs/moe.md): FA3 runs at the cuDNN curve, which on the
    SMs DeepEP leaves is slower than the trace's FA3 kernels (+22%); the dispatch and combine are
    priced at DeepEP's benchmarked bandwidth, below the DeepEP stream's busy time, which counts
    waiting for peers. The bandwidth time can never exceed the busy time."""
    assert predicted["attention"] > TRACE["compare"]["attention_ms"] / 1e3
    assert predicted["ep_comm"] < TRACE["streams"]["deepep"]["ep_data_ms"] / 1e3


def test_the_trace_options_each_matter(predicted):
    """Each DeepSeek option moves the chunk pair: without the reserved SMs compute is faster;
    block-wise FP8 GEMMs are slower than tensor-wise ones."""
    sc = pm.load_scenario(ROOT / TRACE["scenario"]).model_dump(mode="json")
    for option, value, sign in (("moe_comm_reserved_sms", 0, -1), ("fp8_scaling", "tensorwise", -1)):
        changed = dict(sc, software={**sc["software"], option: value})
        other = chunk_pair(pm.resolve(pm.load_scenario(changed)), TRACE["num_layers"]).as_traced()
        assert sign * (other["gemm"] - predicted["gemm"]) > 0, option
