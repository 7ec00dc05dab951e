"""Shared fixtures: small scenarios built inline so tests do not depend on presets."""

import pytest

from perfmodel.spec.scenario import parse_scenario

GPT_SMALL = dict(name="gpt-small", num_layers=8, hidden_size=1024, num_attention_heads=16,
                 ffn_hidden_size=4096, vocab_size=32000)


def scenario(**over):
    base = dict(hardware="h100-sxm", num_gpus=16, model=dict(GPT_SMALL), seq_length=2048,
                global_batch_size=64, micro_batch_size=1,
                parallelism=dict(tp=2, pp=2, vpp=1, cp=1, zero_stage=1), recompute="none", precision="bf16")
    par = over.pop("parallelism", {})
    base.update(over)
    base["parallelism"] = {**base["parallelism"], **par}
    return parse_scenario(base)


@pytest.fixture
def make_scenario():
    return scenario
