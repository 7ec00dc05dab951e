"""Sizing a service: the cheapest hardware, replica layout and GPU count that serve a request rate
within the latency objectives.

For each hardware and replica layout (``layouts``: tensor parallelism 1-8 inside a host; pipeline
stages 2 and 4 of 8-GPU hosts for models one host cannot hold; for MoE models expert parallelism
over the tensor-parallel GPUs, and data-parallel attention with experts spread over the host), a
replica's SLO goodput is the most requests per second it completes on the throughput-
latency curve with TTFT and TPOT within the objectives (``engine.serve``); the deployment needs
ceil(rate / goodput) replicas, and its price per hour is GPUs x the hardware's price. The answer is
the cheapest; every option comes back, with the reason where one cannot serve at all.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from perfmodel.engine.serve import serve
from perfmodel.spec.errors import InputError
from perfmodel.spec.hardware import load_hardware, reference_hardware_ids
from perfmodel.spec.profile import AUTO, efficiencies_for
from perfmodel.spec.serving import ServingScenario, serving_model

MAX_SIZING_TP = 8
"""Largest tensor-parallel degree tried: one 8-GPU host (tensor parallelism stays inside the
NVLink domain; Megatron-LM and serving engines use tp <= 8 on HGX systems)."""
SIZING_PP = (2, 4)
"""Pipeline stages tried beyond one host, each stage a tp-8 host: vLLM and TensorRT-LLM serve models
larger than a node with tensor parallelism inside a node and pipeline parallelism across nodes
(vLLM docs, distributed serving: "tensor parallel size ... GPUs in each node, pipeline parallel size
... the number of nodes")."""


def layouts(moe: bool) -> tuple[dict, ...]:
    """Replica layouts sizing tries: tp 1, 2, 4, 8; tp 8 with pp 2 and 4; and, for a MoE model, the
    experts spread over the replica (ep = tp) and data-parallel attention on each GPU of a host with
    the experts spread over it (attention_dp = ep = 2, 4, 8: SGLang ``--enable-dp-attention``,
    TensorRT-LLM ``enable_attention_dp``), each also with pp 2 and 4 at 8 GPUs per stage."""
    tps = [2 ** i for i in range(int(math.log2(MAX_SIZING_TP)) + 1)]
    out = [{"tp": t} for t in tps] + [{"tp": MAX_SIZING_TP, "pp": p} for p in SIZING_PP]
    if moe:
        wide = [{"tp": t, "ep": t} for t in tps[1:]] + [{"tp": 1, "attention_dp": t, "ep": t} for t in tps[1:]]
        out += wide + [{**w, "pp": p} for w in wide if w["ep"] == MAX_SIZING_TP for p in SIZING_PP]
    return tuple(out)


@dataclass(frozen=True)
class ServingOption:
    hardware: str
    tp: int
    replicas: int
    num_gpus: int
    goodput_requests_per_s_per_replica: float
    usd_per_hour: float
    ttft_s: float
    tpot_s: float
    reason: str = ""
    """Why this option cannot serve the objectives ('' when it can)."""
    pp: int = 1
    ep: int = 1
    attention_dp: int = 1
    layout: str = ""
    """'tp8 pp2 ep8 adp1': the replica's layout in words."""


@dataclass(frozen=True)
class ServingSize:
    requests_per_s: float
    best: ServingOption | None
    options: tuple[ServingOption, ...]

    def to_dict(self) -> dict:
        return {"requests_per_s": self.requests_per_s, "best": asdict(self.best) if self.best else None,
                "options": [asdict(o) for o in self.options]}


def _option(sc: ServingScenario, hw_id: str, layout: dict, rate: float, profile) -> ServingOption:
    hw = load_hardware(hw_id)
    sv = sc.serving
    par = sv.parallelism.model_copy(update={"tp": 1, "pp": 1, "attention_dp": 1, "ep": 1, **layout})
    words = {"pp": par.pp, "ep": par.ep, "attention_dp": par.attention_dp,
             "layout": f"tp{par.tp} pp{par.pp} ep{par.ep} adp{par.attention_dp}"}
    if not hw.gpu.supports(sv.precision.activations):
        return ServingOption(hw_id, par.tp, 0, 0, 0.0, math.inf, math.nan, math.nan,
                             f"{hw.gpu.name} has no {sv.precision.activations} tensor cores", **words)
    one = sc.model_copy(update={"hardware": hw_id, "num_gpus": None,
                                "serving": sv.model_copy(update={"parallelism": par, "requests_per_s": None,
                                                                 "concurrency": 1})})
    try:
        p = serve(one, hw, serving_model(sc), efficiencies_for(hw, profile)[0])
    except InputError as exc:
        return ServingOption(hw_id, par.tp, 0, 0, 0.0, math.inf, math.nan, math.nan, exc.reason, **words)
    good = p.slo_goodput_requests_per_s
    if good <= 0:
        return ServingOption(hw_id, par.tp, 0, 0, 0.0, math.inf, p.curve[0].ttft_s, p.curve[0].tpot_s,
                             "no concurrency meets the objectives", **words)
    best = max((c for c in p.curve if c.meets_objectives), key=lambda c: c.requests_per_s_per_replica)
    replicas = math.ceil(rate / good)
    gpus = replicas * par.replica_gpus
    return ServingOption(hw_id, par.tp, replicas, gpus, good, gpus * p.usd_per_gpu_hour, best.ttft_s, best.tpot_s,
                         **words)


def size_serving(sc: ServingScenario, hardware_ids: tuple[str, ...] | None = None, profile=AUTO) -> ServingSize:
    """The cheapest deployment of ``sc``'s model serving ``sc.serving.requests_per_s`` within its objectives,
    over ``hardware_ids`` (default: the catalogue's shipping reference specs; announced ones only when
    named). A replica's goodput is read at the concurrencies of the curve (1, 2, 4, ...)."""
    rate = sc.serving.requests_per_s
    if rate is None:
        raise InputError("serving.requests_per_s", "sizing a service needs the request rate it must serve")
    ids = hardware_ids or tuple(i for i in reference_hardware_ids() if load_hardware(i).availability == "shipping")
    tries = layouts(serving_model(sc).moe is not None)
    options = tuple(sorted((_option(sc, h, lay, rate, profile) for h in ids for lay in tries),
                           key=lambda o: (o.usd_per_hour, o.num_gpus)))
    ok = [o for o in options if not o.reason]
    return ServingSize(rate, ok[0] if ok else None, options)
