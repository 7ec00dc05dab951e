"""Serving validation: the serving engine against the published results of
``perfmodel/data/serving_runs.yaml`` (docs/serving_data.md).

A row becomes a ``ServingScenario`` by rules stated here once, the same for every row (nothing is
fitted to a row):

- lengths: the row's fixed ``input_tokens`` and ``output_tokens``; a row without them (MLPerf's
  datasets, production averages) is skipped and says so;
- layout: the row's tp and pp (ep and attention_dp where stated), one replica per tp x pp group;
- precision: the row's weights format; activations in the same format (fp8 and NVFP4 checkpoints
  run W8A8 and W4A4 GEMMs in TensorRT-LLM); the KV cache as stated, else fp8 with fp8/fp4 weights
  (NVIDIA ModelOpt checkpoints set ``kv_cache_quant_algo: FP8`` in hf_quant_config.json) and the
  weights' own format otherwise;
- load: each row is compared at the best point of its throughput-latency curve within its
  published objectives: max-throughput rows (all requests queued at once, no objective) at the most
  requests the replica's KV cache holds, capped at the engine's batch limit
  (``DEFAULT_MAX_CONCURRENCY``; trtllm-bench rows: ``TRTLLM_BENCH_MAX_BATCH`` and at most the
  benchmark's ``num_requests``, ``_batch_limit``); decode pools within the TPOT their users saw (``_decode_pool``);
  continuous (in-flight) batching, CUDA graphs on.

The error of a row is predicted / measured - 1 on output tokens/s per GPU; MAPE is the mean of
its absolute value.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from perfmodel.engine.serve import serve
from perfmodel.spec.errors import InputError, read_data_file
from perfmodel.spec.hardware import list_hardware_ids, load_hardware
from perfmodel.spec.paths import PROJECT_DIR
from perfmodel.spec.presets import list_presets, load_model
from perfmodel.spec.profile import AUTO, efficiencies_for
from perfmodel.spec.serving import DEFAULT_MAX_CONCURRENCY, parse_serving_scenario

SERVING_RUNS = PROJECT_DIR / "perfmodel" / "data" / "serving_runs.yaml"
SERVING_FORMAT = "perfmodel-serving-runs/1"
WEIGHT_FORMATS = {"fp4": "fp4", "nvfp4": "fp4", "fp8": "fp8", "fp16": "fp16", "bf16": "bf16"}
"""Weight formats as the rows write them -> ``FORMAT_BYTES`` keys."""
LOW_BIT_KV_DEFAULT = "fp8"
"""KV cache of an fp8/fp4 checkpoint whose row does not state it: ModelOpt's FP8 KV quantisation."""
MAX_THROUGHPUT = ("max-throughput", "offline")
DECODE_POOL_OUTPUT_TOKENS = 1
"""A decode pool row gives the mean context a step reads, not the lengths: the context is the prompt
and one output token adds half a token to it (the engine's mean context is prompt + output / 2)."""
"""Scenario words of rows measured with every request queued at once."""
TRTLLM_BENCH_MAX_BATCH = 4096
"""Most requests ``trtllm-bench`` lets the engine batch: its tuning heuristic caps the batch at
min(requests the KV cache holds, 4096) / pp (TensorRT-LLM ``tensorrt_llm/bench/build/tuning.py``,
``finetune_setting``), used by ``trtllm-bench build`` (v0.17 perf overview) and the PyTorch
backend (v1.0 perf overview); the KV cache bound is the engine's own."""


@dataclass(frozen=True)
class ServingCase:
    id: str
    gpu: str
    model: str
    layout: str
    concurrency: int
    predicted_output_tokens_per_s_per_gpu: float
    measured_output_tokens_per_s_per_gpu: float

    @property
    def error(self) -> float:
        return self.predicted_output_tokens_per_s_per_gpu / self.measured_output_tokens_per_s_per_gpu - 1


@dataclass(frozen=True)
class ServingValidation:
    cases: tuple[ServingCase, ...]
    skipped: tuple[tuple[str, str], ...]
    """(row id, why it was not compared)."""

    @property
    def mape(self) -> float:
        return sum(abs(c.error) for c in self.cases) / len(self.cases) if self.cases else float("nan")

    def mape_by_gpu(self) -> dict[str, tuple[int, float]]:
        by = defaultdict(list)
        for c in self.cases:
            by[c.gpu].append(abs(c.error))
        return {g: (len(v), sum(v) / len(v)) for g, v in sorted(by.items())}

    def to_dict(self) -> dict:
        return {"mape": self.mape, "num_cases": len(self.cases),
                "mape_by_gpu": {g: {"cases": n, "mape": e} for g, (n, e) in self.mape_by_gpu().items()},
                "cases": [{**c.__dict__, "error": c.error} for c in self.cases],
                "skipped": [{"id": i, "reason": r} for i, r in self.skipped]}


def is_serving_file(data) -> bool:
    return isinstance(data, dict) and data.get("format") == SERVING_FORMAT


def _first_word(text) -> str:
    return str(text).split()[0].lower() if text else ""


def _measured_per_gpu(row: dict) -> float | None:
    m, n = row.get("measured", {}), row.get("num_gpus")
    if "output_tokens_per_s_per_gpu" in m:
        return float(m["output_tokens_per_s_per_gpu"])
    if "output_tokens_per_s_per_node" in m and row.get("gpus_per_node"):
        return float(m["output_tokens_per_s_per_node"]) / row["gpus_per_node"]
    if "output_tokens_per_s" in m and n:
        return float(m["output_tokens_per_s"]) / n
    return None


def _decode_pool(row: dict) -> tuple[dict | None, str]:
    """A decode pool that publishes its mean context and its users' speed: the pool decodes at the
    most requests whose TPOT stays within 1 / (the slowest published tokens/s per user); expert
    parallelism over all its GPUs with data-parallel attention on each (one replica)."""
    w, m, par, n = row.get("workload", {}), row.get("measured", {}), row.get("parallelism") or {}, row.get("num_gpus")
    ctx, speed = w.get("mean_kv_cache_tokens_per_output_token"), m.get("output_tokens_per_s_per_user_min")
    if not (ctx and speed and n and par.get("ep") == n):
        return None, "decode pool without its context, users' speed or an expert-parallel group over its GPUs"
    tp = int(par.get("tp", 1))
    return {"pool": "decode", "prompt_tokens": int(ctx), "output_tokens": DECODE_POOL_OUTPUT_TOKENS,
            "tpot_s": 1.0 / speed, "parallelism": {"tp": tp, "attention_dp": n // tp, "ep": n}}, ""


def scenario_of_row(row: dict) -> tuple[dict | None, str]:
    """(the serving scenario mapping of a row, '') or (None, why the row cannot be one)."""
    w = row.get("workload", {})
    kind = str(w.get("scenario", ""))
    pool = None
    if "decode pool" in kind:
        pool, why = _decode_pool(row)
        if pool is None:
            return None, why
    elif not kind.startswith(MAX_THROUGHPUT):
        return None, f"scenario {kind[:40]!r}: only max-throughput rows and decode pools are compared so far"
    elif "input_tokens" not in w or "output_tokens" not in w:
        return None, "no fixed input/output lengths in the row"
    if row.get("hardware") not in list_hardware_ids():
        return None, "hardware not in the catalogue"
    if row.get("model") not in list_presets():
        return None, "model not a preset"
    if _measured_per_gpu(row) is None:
        return None, "no output tokens/s with a GPU count"
    prec = row.get("precision", {})
    weights = WEIGHT_FORMATS.get(_first_word(prec.get("weights")))
    if weights is None:
        return None, f"weights format {prec.get('weights')!r} not modelled"
    kv = WEIGHT_FORMATS.get(_first_word(prec.get("kv_cache")))
    kv = kv or (LOW_BIT_KV_DEFAULT if weights in ("fp8", "fp4") else weights)
    par = row.get("parallelism") or {}
    layout = {k: int(par[k]) for k in ("tp", "pp", "ep") if k in par}
    tp_pp = layout.get("tp", 1) * layout.get("pp", 1)
    if row.get("num_gpus") and row["num_gpus"] % tp_pp:
        return None, f"num_gpus {row['num_gpus']} is not a multiple of tp x pp = {tp_pp}"
    serving = pool or {"prompt_tokens": int(w["input_tokens"]), "output_tokens": int(w["output_tokens"]),
                       "parallelism": layout}
    batch = _batch_limit(row)
    return {"name": row["id"], "hardware": row["hardware"], "model": row["model"], "num_gpus": row.get("num_gpus"),
            "serving": {**serving, "concurrency": batch, "max_concurrency": batch,
                        "precision": {"weights": weights, "activations": weights, "kv_cache": kv}}}, ""


def _batch_limit(row: dict) -> int:
    """Most requests the row's engine batches: trtllm-bench's cap, and no more than the requests the
    benchmark sends (``workload.num_requests``: all are queued at once); other engines
    ``DEFAULT_MAX_CONCURRENCY``."""
    if not str(row.get("engine", {}).get("benchmark", "")).startswith("trtllm-bench"):
        return DEFAULT_MAX_CONCURRENCY
    sent = row.get("workload", {}).get("num_requests")
    return min(TRTLLM_BENCH_MAX_BATCH, int(sent)) if sent else TRTLLM_BENCH_MAX_BATCH


def validate_serving(path=SERVING_RUNS, profile=AUTO) -> ServingValidation:
    data = read_data_file(path, "serving runs")
    if not is_serving_file(data):
        raise InputError("serving runs", f"not a {SERVING_FORMAT} file")
    cases, skipped = [], []
    for row in data.get("runs", []):
        mapping, why = scenario_of_row(row)
        if mapping is None:
            skipped.append((row["id"], why))
            continue
        try:
            sc = parse_serving_scenario(mapping)
            hw, m = load_hardware(sc.hardware), load_model(sc.model)
            p = serve(sc, hw, m, efficiencies_for(hw, profile)[0])
        except InputError as exc:
            skipped.append((row["id"], str(exc)))
            continue
        par = sc.serving.parallelism
        good = [c for c in p.curve if c.meets_objectives]
        best = max(good, key=lambda c: c.output_tokens_per_s_per_gpu) if good else p.curve[0]
        cases.append(ServingCase(row["id"], hw.reference_id, row["model"],
                                 f"tp{par.tp} pp{par.pp} ep{par.ep} adp{par.attention_dp}",
                                 best.concurrency, best.output_tokens_per_s_per_gpu, _measured_per_gpu(row)))
    return ServingValidation(tuple(cases), tuple(skipped))


def serving_file(path) -> bool:
    """Whether ``path`` is a serving-runs file (``perfmodel validate`` sends it here)."""
    try:
        with open(path, encoding="utf-8") as f:
            head = f.read(8192)
    except (OSError, UnicodeDecodeError):   # not a readable text file: the training validation says why
        return False
    return f"format: {SERVING_FORMAT}" in head
