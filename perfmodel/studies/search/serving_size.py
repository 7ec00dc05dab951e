"""Sizing a service: the cheapest hardware, replica layout and GPU count that serve a request rate
within the latency objectives.

For each hardware and tensor-parallel degree (powers of two up to the scale-up domain's hosts'
GPUs), a replica's SLO goodput is the most requests per second it completes on the throughput-
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


@dataclass(frozen=True)
class ServingSize:
    requests_per_s: float
    best: ServingOption | None
    options: tuple[ServingOption, ...]

    def to_dict(self) -> dict:
        return {"requests_per_s": self.requests_per_s, "best": asdict(self.best) if self.best else None,
                "options": [asdict(o) for o in self.options]}


def _option(sc: ServingScenario, hw_id: str, tp: int, rate: float, profile) -> ServingOption:
    hw = load_hardware(hw_id)
    sv = sc.serving
    if not hw.gpu.supports(sv.precision.activations):
        return ServingOption(hw_id, tp, 0, 0, 0.0, math.inf, math.nan, math.nan,
                             f"{hw.gpu.name} has no {sv.precision.activations} tensor cores")
    par = sv.parallelism.model_copy(update={"tp": tp, "pp": 1, "attention_dp": 1, "ep": 1})
    one = sc.model_copy(update={"hardware": hw_id, "num_gpus": None,
                                "serving": sv.model_copy(update={"parallelism": par, "requests_per_s": None,
                                                                 "concurrency": 1})})
    try:
        p = serve(one, hw, serving_model(sc), efficiencies_for(hw, profile)[0])
    except InputError as exc:
        return ServingOption(hw_id, tp, 0, 0, 0.0, math.inf, math.nan, math.nan, exc.reason)
    good = p.slo_goodput_requests_per_s
    if good <= 0:
        return ServingOption(hw_id, tp, 0, 0, 0.0, math.inf, p.curve[0].ttft_s, p.curve[0].tpot_s,
                             "no concurrency meets the objectives")
    best = max((c for c in p.curve if c.meets_objectives), key=lambda c: c.requests_per_s_per_replica)
    replicas = math.ceil(rate / good)
    return ServingOption(hw_id, tp, replicas, replicas * tp, good, replicas * tp * p.usd_per_gpu_hour,
                         best.ttft_s, best.tpot_s)


def size_serving(sc: ServingScenario, hardware_ids: tuple[str, ...] | None = None, profile=AUTO) -> ServingSize:
    """The cheapest deployment of ``sc``'s model serving ``sc.serving.requests_per_s`` within its objectives,
    over ``hardware_ids`` (default: the catalogue's shipping reference specs; announced ones only when
    named). A replica's goodput is read at the concurrencies of the curve (1, 2, 4, ...)."""
    rate = sc.serving.requests_per_s
    if rate is None:
        raise InputError("serving.requests_per_s", "sizing a service needs the request rate it must serve")
    ids = hardware_ids or tuple(i for i in reference_hardware_ids() if load_hardware(i).availability == "shipping")
    tps = [2 ** i for i in range(int(math.log2(MAX_SIZING_TP)) + 1)]
    options = tuple(sorted((_option(sc, h, tp, rate, profile) for h in ids for tp in tps),
                           key=lambda o: (o.usd_per_hour, o.num_gpus)))
    ok = [o for o in options if not o.reason]
    return ServingSize(rate, ok[0] if ok else None, options)
