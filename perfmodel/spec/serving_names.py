"""The serving scenario's vocabularies (``perfmodel.spec.serving``), apart from its models so that
a training scenario's ``studies`` section (``perfmodel.spec.studies``), which names them for the
Serve page, loads without building the serving models (a ``predict`` uses none of them)."""

from __future__ import annotations

from typing import Literal

Batching = Literal["static", "continuous", "chunked_prefill"]
Pool = Literal["both", "prefill", "decode"]
WeightFormat = Literal["bf16", "fp16", "fp8", "fp4"]
KvFormat = Literal["bf16", "fp16", "fp8", "fp4"]
Statistic = Literal["mean", "p50", "p99"]
KvLink = Literal["scale_out", "scale_up"]
