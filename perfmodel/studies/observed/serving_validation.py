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
  benchmark's ``num_requests``, ``_batch_limit``), with prompts packed into prefill passes up to the
  token budget trtllm-bench sets (``trtllm_bench_max_num_tokens``: every request is queued at once,
  so the scheduler fills each pass); decode pools within the TPOT their users saw (``_decode_pool``);
  continuous (in-flight) batching, CUDA graphs on.

The error of a row is predicted / measured - 1 on output tokens/s per GPU; MAPE is the mean of
its absolute value.

Latency rows (``online`` scenario) are served at the row's load: open loop at its rate
(``workload.requests_per_s``; Poisson arrivals, the engine's queue; the sources do not state the
arrival process), or closed loop at its number of concurrent requests (``workload.concurrency``;
arrivals taken as Poisson at the rate served, as the engine's percentiles do). They are compared on
TTFT and TPOT at the statistic the row publishes: the mean TTFT is the engine's TTFT plus the M/D/1
mean wait for the prefill at that rate (``formulas.latency.md1_mean_wait_s``), the mean TPOT (or
ITL: for a fixed output length the mean gap between tokens) the engine's TPOT; a published p50 is
compared with the engine's p50. Not compared: a rate the replica cannot serve (the engine says
saturated: no steady state, the queue grows for the whole run), and more concurrent requests than
the replica's KV cache holds (the rest wait outside the engine, a queue the engine does not model).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from perfmodel.engine.serve import ServePrediction, serve
from perfmodel.formulas.latency import md1_mean_wait_s
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
"""Scenario words of rows measured with every request queued at once."""
ONLINE = "online"
"""Scenario word of rows measured with requests sent at a set rate (their latencies are compared)."""
DECODE_POOL_OUTPUT_TOKENS = 1
"""A decode pool row gives the mean context a step reads, not the lengths: the context is the prompt
and one output token adds half a token to it (the engine's mean context is prompt + output / 2)."""
TRTLLM_BENCH_MAX_TOKENS = 32768
"""Most tokens per pass trtllm-bench sets (``tuning.py``, ``finetune_setting``: "Cap num tokens to
avoid TRT activation buffer becoming too large")."""
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
class LatencyCase:
    """One published latency: ``metric`` ttft or tpot, at ``statistic`` mean or p50."""

    id: str
    gpu: str
    model: str
    layout: str
    requests_per_s: float
    metric: str
    statistic: str
    predicted_s: float
    measured_s: float

    @property
    def error(self) -> float:
        return self.predicted_s / self.measured_s - 1


def _mape(errors) -> float:
    errors = list(errors)
    return sum(abs(e) for e in errors) / len(errors) if errors else float("nan")


@dataclass(frozen=True)
class ServingValidation:
    cases: tuple[ServingCase, ...]
    skipped: tuple[tuple[str, str], ...]
    """(row id, why it was not compared)."""
    latency_cases: tuple[LatencyCase, ...] = ()

    def latency_mape(self) -> dict[str, tuple[int, float]]:
        """{metric: (results, MAPE)} over the latency cases, and per GPU as 'metric gpu'."""
        by = defaultdict(list)
        for c in self.latency_cases:
            by[c.metric].append(c.error)
            by[f"{c.metric} {c.gpu}"].append(c.error)
        return {k: (len(v), _mape(v)) for k, v in sorted(by.items())}

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
                "latency_mape": {k: {"cases": n, "mape": e} for k, (n, e) in self.latency_mape().items()},
                "latency_cases": [{**c.__dict__, "error": c.error} for c in self.latency_cases],
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
    online = kind.startswith(ONLINE)
    if online and not (w.get("requests_per_s") or w.get("concurrency")):
        return None, "online row without its request rate or concurrency"
    if "decode pool" in kind:
        pool, why = _decode_pool(row)
        if pool is None:
            return None, why
    elif not (kind.startswith(MAX_THROUGHPUT) or online):
        return None, f"scenario {kind[:40]!r}: only max-throughput rows and decode pools are compared so far"
    elif "input_tokens" not in w or "output_tokens" not in w:
        return None, "no fixed input/output lengths in the row"
    if row.get("hardware") not in list_hardware_ids():
        return None, "hardware not in the catalogue"
    if row.get("model") not in list_presets():
        return None, "model not a preset"
    if not online and _measured_per_gpu(row) is None:
        return None, "no output tokens/s with a GPU count"
    if online and not _published_latencies(row):
        return None, "online row without a mean or p50 TTFT or TPOT"
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
    load = {"concurrency": batch}
    if online:
        load = {"requests_per_s": float(w["requests_per_s"])} if w.get("requests_per_s") else {"concurrency": int(w["concurrency"])}
    return {"name": row["id"], "hardware": row["hardware"], "model": row["model"], "num_gpus": row.get("num_gpus"),
            "serving": {**serving, **load, "max_concurrency": batch,
                        "precision": {"weights": weights, "activations": weights, "kv_cache": kv}}}, ""


LATENCY_KEYS = {("ttft", "mean"): "ttft_mean_s", ("ttft", "p50"): "ttft_p50_s", ("tpot", "mean"): "tpot_mean_s",
                ("tpot", "p50"): "tpot_p50_s"}
ITL_KEYS = {"mean": "itl_mean_s", "p50": "itl_p50_s"}
"""Inter-token latency: with every request's output length fixed, its mean (median) is the TPOT's."""


def _published_latencies(row: dict) -> dict[tuple[str, str], float]:
    """{(metric, statistic): seconds} the row publishes, the mean before the p50 of each metric."""
    m, out = row.get("measured", {}), {}
    for metric in ("ttft", "tpot"):
        for stat in ("mean", "p50"):
            key = m.get(LATENCY_KEYS[metric, stat]) or (m.get(ITL_KEYS[stat]) if metric == "tpot" else None)
            if key:
                out[metric, stat] = float(key)
                break
    return out


def latency_cases(row: dict, p: ServePrediction, attention_dp: int, layout: str, gpu: str) -> list[LatencyCase]:
    """The row's published TTFT and TPOT against the engine's at the row's rate (module docstring):
    each attention group's prefill is a queue fed 1 / (replicas x groups) of the rate."""
    pt, rate = p.point, float(row["workload"].get("requests_per_s") or p.point.requests_per_s_per_replica * p.replicas)
    rate_group = rate / (p.replicas * attention_dp)
    predicted = {("ttft", "mean"): pt.ttft_s + md1_mean_wait_s(rate_group, pt.prefill_s), ("ttft", "p50"): pt.ttft_p50_s,
                 ("tpot", "mean"): pt.tpot_s, ("tpot", "p50"): pt.tpot_p50_s}
    return [LatencyCase(row["id"], gpu, row["model"], layout, rate, metric, stat, predicted[metric, stat], value)
            for (metric, stat), value in _published_latencies(row).items()]


def trtllm_bench_max_num_tokens(requests: float, input_tokens: int, output_tokens: int, pp: int) -> int:
    """The ``max_num_tokens`` trtllm-bench gives the engine (TensorRT-LLM
    ``tensorrt_llm/bench/build/tuning.py``, ``finetune_setting``): from the requests the KV cache holds,
    raw = min(min(requests, 4096) / pp x (1 + ISL / OSL), 32768), rounded up to a multiple of 256 (at
    least 2048) below 4096, of 512 below 8192, else of 1024. Here ``requests`` is the engine's own count
    of what the cache holds (trtllm-bench estimates it from the checkpoint's size and the GPU memory).
    The PyTorch backend takes the same heuristic (``bench/benchmark/utils/general.py``, ``get_settings``;
    it also raises the budget to ISL + max batch without chunked prefill, which no compared row reaches),
    and the pre-defined settings of ``bench/build/benchmark_config.yml`` name none of the compared
    checkpoints."""
    raw = min(min(requests, TRTLLM_BENCH_MAX_BATCH) / pp * (1 + input_tokens / output_tokens), TRTLLM_BENCH_MAX_TOKENS)
    if raw < 4096:
        return max(2048, 256 * math.ceil(raw / 256))
    if raw < 8192:
        return 512 * math.ceil(raw / 512)
    return 1024 * math.ceil(raw / 1024)


def _is_trtllm_bench(row: dict) -> bool:
    return str(row.get("engine", {}).get("benchmark", "")).startswith("trtllm-bench")


def _packed(mapping: dict, row: dict, hw, m, eff):
    """A trtllm-bench max-throughput row's scenario with its prefill token budget: the engine's count of
    requests the cache holds (up to trtllm-bench's cap) through ``trtllm_bench_max_num_tokens``."""
    if not _is_trtllm_bench(row) or str(row["workload"].get("scenario", "")).startswith(ONLINE):
        return parse_serving_scenario(mapping)
    sv = mapping["serving"]
    probe = {**mapping, "serving": {**sv, "concurrency": TRTLLM_BENCH_MAX_BATCH, "max_concurrency": TRTLLM_BENCH_MAX_BATCH}}
    held = serve(parse_serving_scenario(probe), hw, m, eff).max_concurrency
    pp = sv.get("parallelism", {}).get("pp", 1)
    tokens = trtllm_bench_max_num_tokens(held, sv["prompt_tokens"], sv["output_tokens"], pp)
    return parse_serving_scenario({**mapping, "serving": {**sv, "prefill_tokens_per_pass": tokens}})


def _batch_limit(row: dict) -> int:
    """Most requests the row's engine batches: trtllm-bench's cap, and no more than the requests the
    benchmark sends (``workload.num_requests``: all are queued at once); other engines
    ``DEFAULT_MAX_CONCURRENCY``."""
    if not _is_trtllm_bench(row):
        return DEFAULT_MAX_CONCURRENCY
    sent = row.get("workload", {}).get("num_requests")
    return min(TRTLLM_BENCH_MAX_BATCH, int(sent)) if sent else TRTLLM_BENCH_MAX_BATCH


def validate_serving(path=SERVING_RUNS, profile=AUTO) -> ServingValidation:
    data = read_data_file(path, "serving runs")
    if not is_serving_file(data):
        raise InputError("serving runs", f"not a {SERVING_FORMAT} file")
    cases, skipped, latencies = [], [], []
    for row in data.get("runs", []):
        mapping, why = scenario_of_row(row)
        if mapping is None:
            skipped.append((row["id"], why))
            continue
        try:
            hw, m = load_hardware(mapping["hardware"]), load_model(mapping["model"])
            eff = efficiencies_for(hw, profile)[0]
            sc = _packed(mapping, row, hw, m, eff)
            p = serve(sc, hw, m, eff)
        except InputError as exc:
            skipped.append((row["id"], str(exc)))
            continue
        par = sc.serving.parallelism
        layout = f"tp{par.tp} pp{par.pp} ep{par.ep} adp{par.attention_dp}"
        if str(row["workload"].get("scenario", "")).startswith(ONLINE):
            asked = sc.serving.concurrency
            if asked is not None and p.point.concurrency < asked:
                why = (f"{asked} concurrent requests, more than the {p.max_concurrency} the KV cache holds: the rest "
                       "queue outside the engine")
                skipped.append((row["id"], why))
            elif p.saturated:
                why = (f"predicted saturated: a replica serves less than {sc.serving.requests_per_s:g} requests/s, "
                       "so its queue has no steady state")
                skipped.append((row["id"], why))
            else:
                latencies += latency_cases(row, p, par.attention_dp, layout, hw.reference_id)
            continue
        good = [c for c in p.curve if c.meets_objectives]
        best = max(good, key=lambda c: c.output_tokens_per_s_per_gpu) if good else p.curve[0]
        cases.append(ServingCase(row["id"], hw.reference_id, row["model"],
                                 layout,
                                 best.concurrency, best.output_tokens_per_s_per_gpu, _measured_per_gpu(row)))
    return ServingValidation(tuple(cases), tuple(skipped), tuple(latencies))


def serving_file(path) -> bool:
    """Whether ``path`` is a serving-runs file (``perfmodel validate`` sends it here)."""
    try:
        with open(path, encoding="utf-8") as f:
            head = f.read(8192)
    except (OSError, UnicodeDecodeError):   # not a readable text file: the training validation says why
        return False
    return f"format: {SERVING_FORMAT}" in head
