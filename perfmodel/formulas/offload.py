"""Activation offloading to host memory: what stays in HBM, and what the copies cost.

Megatron-Core's ``cpu_offloading`` with ``cpu_offloading_num_layers`` = n (scenario field
``activation_offload_layers``) hands the transformer layers to Transformer Engine's
``get_cpu_offload_context``, whose ``AsyncDoubleBufferGroupOffloadHandler``
(``transformer_engine/pytorch/cpu_offload.py``) works layer by layer ("groups"):

* the first n of the l layers are offloaded, the last l - n keep their activations in HBM;
* offload window: the copy of layer i to the host must be complete at the end of layer
  w_i = (l // n)(i + 1) - 1 (spread evenly, the remainder on the first windows), and layer
  i + 1's copy starts only then, on one device-to-host stream. Each copy therefore runs beside
  about l / n layers of forward compute, and the forward waits for whatever is left of it;
* the backward reloads layer i at layer w_i of its descent, beside about l / n layers of
  backward compute, on one host-to-device stream;
* so the forward ends with the l - n kept layers in HBM, and the backward holds at most one
  reloaded layer besides them.

Megatron-Core allows it only with pp = 1 and no recompute (``TransformerConfig``
``__post_init__``), which ``scenario.check_recompute`` and the layout rules enforce.
"""

from __future__ import annotations

import numpy as np

from perfmodel.formulas.workload import LayerKind, layer_kinds
from perfmodel.spec.model import ModelSpec

HOST_COPY_EFFICIENCY = 0.81
"""Achieved share of the host link's per-direction bandwidth for pinned device-to-host and
host-to-device copies: nvbandwidth on Azure ND H100 v5, 52 GB/s device-to-host and 51
host-to-device of PCIe Gen5 x16's 64 (0.81, 0.80); ND H200 v5, 52 of 64; ND A100 v4, 26.3 of
32 (0.82) (shared/data/microbenchmarks.yaml nvbandwidth_*_host_device). No NVLink-C2C
measurement: GB200's Grace link borrows the PCIe figure."""


def _kind_counts(m: ModelSpec, n: int) -> tuple[dict, dict]:
    """(offloaded, kept) layer counts per kind: the first n layers are offloaded."""
    kinds = layer_kinds(m)
    off = {k: sum(1 for x in kinds[:n] if x is k) for k in LayerKind}
    kept = {k: sum(1 for x in kinds[n:] if x is k) for k in LayerKind}
    return off, kept


def resident_activation_bytes(m: ModelSpec, n: int, per_layer: dict) -> np.ndarray:
    """Activation bytes in HBM at the peak (start of the backward) with n layers offloaded:
    the l - n kept layers and one offloaded layer reloaded ahead of its backward.
    ``per_layer``: bytes of one layer of each kind the model has (one micro-batch)."""
    off, kept = _kind_counts(m, n)
    kept_bytes = sum(kept[k] * per_layer[k] for k in per_layer)
    in_flight = np.max([np.where(off[k] > 0, per_layer[k], 0.0) for k in per_layer], axis=0)
    return kept_bytes + in_flight


def offloaded_bytes_per_layer(m: ModelSpec, n: int, per_layer: dict) -> np.ndarray:
    """Mean activation bytes of one offloaded layer (one micro-batch)."""
    off, _ = _kind_counts(m, n)
    return sum(off[k] * per_layer[k] for k in per_layer) / n


def exposed_copy_s(n: int, num_layers: int, copy_s, fwd_layer_s, bwd_layer_s) -> np.ndarray:
    """Copy time the compute does not hide, per micro-batch: each of the n copies (one way in
    the forward, back in the backward) overlaps about l / n layers of compute."""
    window = num_layers / n
    return n * (np.maximum(copy_s - window * np.asarray(fwd_layer_s), 0.0)
                + np.maximum(copy_s - window * np.asarray(bwd_layer_s), 0.0))
