"""The serving engine, sibling of the training step: a replica's time to first token, time per
output token, throughput, goodput under the objectives and price per million tokens, at one
concurrency and over a curve of them.

==========  =================================================================================
B           requests in flight per replica;  A attention data-parallel groups;  pp stages
P, O        prompt and output tokens per request (means)
k           prompts a prefill pass packs per attention group: 1, or with ``prefill_tokens_per_pass``
            (prompts queued together) min(floor(tokens / P), B / A)
t_pre       one prefill pass of A k prompts (k per attention group), through every stage
t_step      one decode step of the B requests (pp stage passes of B/pp requests each)
n_tok       tokens a step yields per request: 1, or (1 - a^(g+1)) / (1 - a) with speculation
T           time for B requests to finish: (B / (A k)) t_pre + (O / n_tok) t_step
==========  =================================================================================

Request rate = B / T and output tokens/s = B O / T (Little's law over one cycle of the batch).
Continuous batching (Yu et al. 2022, Orca) stalls the decode of everyone while a joining prompt is
prefilled, so a user's mean TPOT is T / O less its own prefill, its worst step t_step + t_pre;
chunked prefill (Agrawal et al. 2024, Sarathi-Serve) bounds the worst step by one chunk; static
batching prefills the whole batch first (TTFT = (B/A) t_pre) and then decodes without stalls.
Goodput counts throughput only where TTFT and TPOT meet the objectives (docs/LENSES: serving
goodput).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from perfmodel.formulas.comm import scale_out_fabric, scale_up_fabric
from perfmodel.formulas.cost import effective_usd_per_gpu_hour
from perfmodel.formulas.kv_cache import max_sequences
from perfmodel.formulas.latency import QUANTILES, tpot_quantile_s, wait_quantile_s
from perfmodel.formulas.ops import OpKind, TpSplit
from perfmodel.formulas.serving import PassTime, expected_tokens_per_step, kv_handoff_s, pass_time
from perfmodel.formulas.workload import head_weight_op, layer_kinds, weight_ops
from perfmodel.spec.efficiency import Efficiencies
from perfmodel.spec.errors import InputError
from perfmodel.spec.hardware import HardwareSpec
from perfmodel.spec.model import ModelSpec
from perfmodel.spec.precision import FORMAT_BYTES
from perfmodel.spec.serving import ServingScenario, ServingSpec
from perfmodel.spec.units import MEGA

SECONDS_PER_HOUR = 3600.0
GPU_MEMORY_UTILIZATION = 0.9
"""Share of HBM a serving engine takes for weights, activations and the KV cache: vLLM's
``gpu_memory_utilization`` default 0.9 (vLLM docs, engine arguments); TensorRT-LLM gives the cache
``free_gpu_memory_fraction`` 0.9 of what the weights leave (TensorRT-LLM docs, KvCacheConfig)."""


@dataclass(frozen=True)
class ServePoint:
    """The replica at one concurrency."""

    concurrency: int
    ttft_s: float
    """Mean time to first token of a prompt that finds the prefill free (no queueing)."""
    tpot_s: float
    ttft_p50_s: float
    """Percentiles with Poisson arrivals queueing for the prefill (``formulas.latency``); static
    batching and a disaggregated pool: the mean (not modelled)."""
    ttft_p99_s: float
    tpot_p50_s: float
    """Percentiles of a request's TPOT from the steps that carry another prefill (or chunk)."""
    tpot_p99_s: float
    tpot_worst_step_s: float
    decode_step_s: float
    prefill_s: float
    requests_per_s_per_replica: float
    output_tokens_per_s_per_replica: float
    output_tokens_per_s_per_gpu: float
    input_tokens_per_s_per_gpu: float
    meets_objectives: bool
    kv_handoff_s: float = 0.0
    """Prefill pool of a disaggregated deployment: the time to send the pass's caches to the decode
    pool, inside its TTFT (``formulas.serving.kv_handoff_s``); 0 otherwise."""


@dataclass(frozen=True)
class ServePrediction:
    name: str
    hardware: str
    model: str
    replicas: int
    gpus_per_replica: int
    num_gpus: int
    weight_bytes_per_gpu: float
    kv_cache_bytes_per_gpu: float
    max_concurrency: int
    point: ServePoint
    saturated: bool
    """The requested rate exceeds what a replica serves at its largest batch."""
    goodput_output_tokens_per_s_per_gpu: float
    """At the operating point: its throughput if it meets the objectives, else 0."""
    slo_goodput_output_tokens_per_s_per_gpu: float
    """The most the replica serves within the objectives, over the curve (0: none meets them)."""
    slo_goodput_requests_per_s: float
    usd_per_gpu_hour: float
    usd_per_million_input_tokens: float
    usd_per_million_output_tokens: float
    decode_breakdown: tuple[dict, ...]
    curve: tuple[ServePoint, ...]

    @property
    def ttft_s(self) -> float:
        return self.point.ttft_s

    @property
    def tpot_s(self) -> float:
        return self.point.tpot_s

    def to_dict(self) -> dict:
        d = asdict(self)
        p = d.pop("point")
        d["curve"] = [asdict(c) for c in self.curve]
        d["decode_breakdown"] = list(self.decode_breakdown)
        return {"ttft_s": p["ttft_s"], "tpot_s": p["tpot_s"],
                **{k: p[k] for k in ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s")},
                "output_tokens_per_s_per_gpu": p["output_tokens_per_s_per_gpu"],
                "output_tokens_per_s_per_replica": p["output_tokens_per_s_per_replica"],
                "requests_per_s": p["requests_per_s_per_replica"] * self.replicas,
                "concurrency_per_replica": p["concurrency"], "point": p, **d}


def weight_bytes_per_gpu(m: ModelSpec, sv: ServingSpec) -> float:
    """Weights one GPU holds: non-expert matrices split by tp (replicated ones whole) and pp,
    experts by the stage's GPUs and pp, embeddings and output layer split by tp and pp."""
    par = sv.parallelism
    b = sv.precision.record().bytes_of("param")   # the stored weights' format
    total = 0.0
    for kind in layer_kinds(m):
        for op in weight_ops(m, kind):
            if op.kind is not OpKind.GEMM:
                continue
            split = par.stage_gpus if op.expert else (par.tp if op.tp_split is not TpSplit.NONE else 1)
            total += op.params * b / split
    head = head_weight_op(m).params * FORMAT_BYTES["bf16"]
    embeddings = head * (1 if m.tied_embeddings else 2)
    return total / par.pp + embeddings / (par.tp * par.pp)


def kv_cache_bytes_per_gpu(hw: HardwareSpec, m: ModelSpec, sv: ServingSpec) -> float:
    return hw.gpu.hbm_bytes * GPU_MEMORY_UTILIZATION - weight_bytes_per_gpu(m, sv)


def prompts_per_pass(sv: ServingSpec, B: float) -> int:
    """k: prompts one prefill pass packs per attention group. With ``prefill_tokens_per_pass`` set
    (prompts that queue together, as in a max-throughput run) the scheduler fills a pass up to that
    many tokens (TensorRT-LLM ``max_num_tokens``, vLLM ``max_num_batched_tokens``), at most the
    group's B / A requests; else 1 (prompts arriving one at a time). Chunked prefill mixes its
    chunks into decode steps instead: 1."""
    if sv.prefill_tokens_per_pass is None or sv.batching == "chunked_prefill":
        return 1
    return max(1, min(sv.prefill_tokens_per_pass // sv.prompt_tokens, int(B // sv.parallelism.attention_dp)))


def _phases(m, sv, hw, eff, B: float) -> tuple[float, float, float, PassTime]:
    """(t_pre for A k prompts, t_step for B requests, tokens per step per request, the step's parts)."""
    par, P, O = sv.parallelism, sv.prompt_tokens, sv.output_tokens
    A = par.attention_dp
    chunks = 1 if sv.batching != "chunked_prefill" else math.ceil(P / sv.chunk_tokens)
    pre = pass_time(m, sv, hw, eff, A * prompts_per_pass(sv, B), P / chunks, P, True)
    t_pre = par.pp * chunks * pre.total_s
    ctx = P + O / 2
    per_stage = max(B / par.pp, 1.0)
    spec = sv.speculative
    if spec is None:
        step = pass_time(m, sv, hw, eff, per_stage, 1, ctx, False)
        return t_pre, par.pp * step.total_s, 1.0, step
    verify = pass_time(m, sv, hw, eff, per_stage, spec.draft_tokens + 1, ctx, False)
    draft = pass_time(m, sv, hw, eff, per_stage, 1, ctx, False)
    t_step = par.pp * (verify.total_s + spec.draft_tokens * spec.draft_cost_frac * draft.total_s)
    return t_pre, t_step, expected_tokens_per_step(spec.acceptance_rate, spec.draft_tokens), verify


def serve_point(m: ModelSpec, sv: ServingSpec, hw: HardwareSpec, eff: Efficiencies, B: int,
                arrival_per_s: float | None) -> ServePoint:
    """The replica at concurrency B; ``arrival_per_s``: the requests per second reaching it (open
    loop), or None for the rate it serves at B (closed loop, its percentiles as if they arrived
    as a Poisson stream of that rate)."""
    par, P, O = sv.parallelism, sv.prompt_tokens, sv.output_tokens
    A = par.attention_dp
    t_pre, t_step, n_tok, _ = _phases(m, sv, hw, eff, B)
    k = prompts_per_pass(sv, B)
    prefills = max(B / (A * k), 1.0)   # prefill passes in a cycle
    cycle_s = prefills * t_pre + O / n_tok * t_step
    gpus = par.replica_gpus
    if sv.pool != "both":
        return _pool_point(sv, m, hw, eff, B, t_pre, t_step, n_tok, gpus)
    rps = B / cycle_s
    if sv.batching == "static":
        ttft = prefills * t_pre
        tpot = worst = t_step / n_tok
        pct = {f"{x}_{q}_s": v for q in QUANTILES for x, v in (("ttft", ttft), ("tpot", tpot))}
    else:
        ttft = t_pre + t_step / 2
        tpot = max(cycle_s - t_pre, 0.0) / O
        chunks = max(1, math.ceil(P / sv.chunk_tokens)) if sv.batching == "chunked_prefill" else 1
        chunk_s = t_pre / chunks
        worst = t_step + chunk_s
        arrival_group = (rps if arrival_per_s is None else arrival_per_s) / (A * k)   # packed passes
        steps = O / n_tok
        stalls_per_step = (prefills - 1) * chunks / steps   # the other requests' prefills (chunks) in its life
        pct = {}
        for name, q in QUANTILES.items():
            pct[f"ttft_{name}_s"] = ttft + wait_quantile_s(q, arrival_group, t_pre, sv.prompt_tokens_cv)
            pct[f"tpot_{name}_s"] = tpot_quantile_s(q, steps, stalls_per_step, t_step, chunk_s, O)
    return ServePoint(B, ttft, tpot, **pct, tpot_worst_step_s=worst, decode_step_s=t_step, prefill_s=t_pre,
                      requests_per_s_per_replica=rps, output_tokens_per_s_per_replica=rps * O,
                      output_tokens_per_s_per_gpu=rps * O / gpus, input_tokens_per_s_per_gpu=rps * P / gpus,
                      meets_objectives=meets(sv, ttft, tpot, pct))


def meets(sv: ServingSpec, ttft: float, tpot: float, pct: dict) -> bool:
    """TTFT and TPOT, at the statistic ``sv.objectives_at`` names, within the objectives."""
    at = sv.objectives_at
    t1, t2 = (ttft, tpot) if at == "mean" else (pct[f"ttft_{at}_s"], pct[f"tpot_{at}_s"])
    return (sv.ttft_s is None or t1 <= sv.ttft_s) and (sv.tpot_s is None or t2 <= sv.tpot_s)


def _pool_point(sv: ServingSpec, m, hw, eff, B: int, t_pre: float, t_step: float, n_tok: float, gpus: int) -> ServePoint:
    """One pool of a disaggregated deployment. Prefill: B prompts per pass (B / A per attention group),
    TTFT = that pass through every stage and the hand-off of its caches to the decode pool over
    ``kv_link`` (``formulas.serving.kv_handoff_s``); the next pass overlaps the hand-off, so the rate
    is B per pass. Decode: B requests per step, no prefill stalls: TPOT = t_step / n_tok; its TTFT is
    one step after the cache arrives."""
    par, P, O = sv.parallelism, sv.prompt_tokens, sv.output_tokens
    if sv.pool == "prefill":
        t = par.pp * pass_time(m, sv, hw, eff, B, P, P, True).total_s
        link = scale_out_fabric(hw, eff) if sv.kv_link == "scale_out" else scale_up_fabric(hw, eff)
        handoff = kv_handoff_s(m, P, FORMAT_BYTES[sv.precision.kv_cache], par.tp, B / par.attention_dp, link)
        ttft = t + handoff
        rps = B / t
        ok = sv.ttft_s is None or ttft <= sv.ttft_s
        return ServePoint(B, ttft, 0.0, ttft, ttft, 0.0, 0.0, 0.0, 0.0, t, rps, 0.0, 0.0, rps * P / gpus, ok, handoff)
    tpot = t_step / n_tok
    rps = B * n_tok / t_step / O
    ok = sv.tpot_s is None or tpot <= sv.tpot_s
    return ServePoint(B, t_step, tpot, t_step, t_step, tpot, tpot, t_step, t_step, t_pre, rps, rps * O,
                      rps * O / gpus, 0.0, ok)


CURVE_STEP = 2 ** 0.5
"""Ratio between neighbouring concurrencies of the curve: two points per doubling."""


def curve_concurrencies(max_b: int) -> tuple[int, ...]:
    """1, 2, 3, 4, 6, 8, 11, 16, ... (steps of sqrt 2, rounded) up to the most the replica holds, and that most."""
    out, x = [], 1.0
    while round(x) < max_b:
        if not out or round(x) > out[-1]:
            out.append(round(x))
        x *= CURVE_STEP
    return tuple(out + [max_b]) if max_b >= 1 else ()


def serve(sc: ServingScenario, hw: HardwareSpec, m: ModelSpec, eff: Efficiencies) -> ServePrediction:
    sv, par = sc.serving, sc.serving.parallelism
    cache = kv_cache_bytes_per_gpu(hw, m, sv)
    weights = weight_bytes_per_gpu(m, sv)
    if cache <= 0:
        raise InputError("serving.parallelism", f"weights take {weights / 2**30:.1f} GiB per GPU of the "
                                                f"{GPU_MEMORY_UTILIZATION} x {hw.gpu.hbm_capacity_gib} GiB an engine "
                                                f"uses: add tp, pp or ep, or store fewer bytes per weight")
    held = max_sequences(cache, m, sv.prompt_tokens + sv.output_tokens, FORMAT_BYTES[sv.precision.kv_cache],
                         par.tp, par.attention_dp)
    max_b = min(held, sv.max_concurrency * par.attention_dp)   # each attention group schedules its own batch
    if max_b < 1:
        raise InputError("serving.prompt_tokens", "one request's KV cache does not fit beside the weights")
    curve = tuple(serve_point(m, sv, hw, eff, b, None) for b in curve_concurrencies(max_b))
    saturated = False
    if sv.concurrency is not None:
        point = serve_point(m, sv, hw, eff, min(sv.concurrency, max_b), None)
    else:
        want = sv.requests_per_s / sc.replicas
        fits = [p for p in curve if p.requests_per_s_per_replica >= want]
        point = serve_point(m, sv, hw, eff, (fits[0] if fits else curve[-1]).concurrency, want)
        saturated = not fits
    good = [p for p in curve if p.meets_objectives]
    best = max(good, key=lambda p: p.output_tokens_per_s_per_gpu) if good else None
    usd_h = effective_usd_per_gpu_hour(hw, sc.cost)
    usd_s_replica = usd_h / SECONDS_PER_HOUR * par.replica_gpus
    prefills = max(point.concurrency / (par.attention_dp * prompts_per_pass(sv, point.concurrency)), 1.0)
    in_usd = usd_s_replica * point.prefill_s * prefills / point.concurrency / sv.prompt_tokens * MEGA
    out_usd = usd_s_replica * point.decode_step_s / (point.concurrency * _tokens_per_step(sv)) * MEGA
    step = _phases(m, sv, hw, eff, point.concurrency)[3]
    return ServePrediction(
        name=sc.name, hardware=hw.id, model=m.name, replicas=sc.replicas, gpus_per_replica=par.replica_gpus,
        num_gpus=sc.total_gpus, weight_bytes_per_gpu=weights, kv_cache_bytes_per_gpu=cache, max_concurrency=max_b,
        point=point, saturated=saturated,
        goodput_output_tokens_per_s_per_gpu=point.output_tokens_per_s_per_gpu if point.meets_objectives else 0.0,
        slo_goodput_output_tokens_per_s_per_gpu=best.output_tokens_per_s_per_gpu if best else 0.0,
        slo_goodput_requests_per_s=best.requests_per_s_per_replica * sc.replicas if best else 0.0,
        usd_per_gpu_hour=usd_h, usd_per_million_input_tokens=in_usd, usd_per_million_output_tokens=out_usd,
        decode_breakdown=tuple(step.rows()), curve=curve)


def _tokens_per_step(sv: ServingSpec) -> float:
    s = sv.speculative
    return 1.0 if s is None else expected_tokens_per_step(s.acceptance_rate, s.draft_tokens)
