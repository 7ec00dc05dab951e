"""The rules that turn a published serving row into a scenario (perfmodel/studies/serving_validation.py),
each against a hand-made row."""

from __future__ import annotations

from perfmodel.spec.serving import DEFAULT_MAX_CONCURRENCY
from perfmodel.studies.serving_validation import TRTLLM_BENCH_MAX_BATCH, _batch_limit


def _row(**workload) -> dict:
    return {"engine": {"name": "TensorRT-LLM", "benchmark": "trtllm-bench throughput"}, "workload": workload}


def test_trtllm_bench_batches_at_most_the_requests_it_sends():
    """The perf overview sends 3,000 requests of 1000/1000 tokens: no more than 3,000 can be in flight."""
    assert _batch_limit(_row(num_requests=3000)) == 3000


def test_trtllm_bench_cap_is_4096_without_a_request_count():
    assert _batch_limit(_row()) == TRTLLM_BENCH_MAX_BATCH == 4096
    assert _batch_limit(_row(num_requests=30000)) == 4096


def test_other_engines_keep_the_default_batch_limit():
    assert _batch_limit({"engine": {"name": "vLLM"}, "workload": {"num_requests": 3000}}) == DEFAULT_MAX_CONCURRENCY
