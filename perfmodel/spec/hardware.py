"""Hardware specs: one YAML per system in ``hardware/``, loaded into frozen models.

YAML keys carry their unit (``hbm_bandwidth_gb_per_s``); the properties below convert to SI
once, here. Every numeric leaf must be covered by an entry of ``sources`` (a dotted path or a
parent of it), so no number enters the model without a citation.

========================  ===============================================================
``peak_flop_per_s(p)``    dense (no 2:4 sparsity) tensor-core peak of precision p, FLOP/s
``hbm_usable_bytes``      what a training process can allocate (capacity less driver and
                          CUDA context reservations)
scale-up bandwidth        per GPU, per direction (NVLink: half the "bidirectional" figure)
scale-out bandwidth       per GPU, per direction = nics_per_gpu * NIC line rate / 8
========================  ===============================================================
"""

from __future__ import annotations

import functools
import os
import re
import reprlib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, StrictBool, model_validator

from perfmodel.spec.efficiency import Efficiencies
from perfmodel.spec.errors import InputError, read_data_file, validated
from perfmodel.spec.fabric import FabricSpec
from perfmodel.spec.limits import (
    MAX_COUNT,
    MAX_GB_PER_S,
    MAX_GBIT_PER_S,
    MAX_GIB,
    MAX_LATENCY_US,
    MAX_NICS_PER_GPU,
    MAX_NUM_GPUS,
    MAX_POWER_W,
    MAX_TFLOP_PER_S,
    MAX_USD,
    MIN_RATE,
    Name,
    int_field,
    real_field,
)
from perfmodel.spec.paths import HARDWARE_SPECS_DIR
from perfmodel.spec.units import BITS_PER_BYTE, GIBI, GIGA, MEBI, MICRO, TERA

PRECISIONS = ("fp64", "tf32", "bf16", "fp16", "fp8", "fp4")

HARDWARE_DIR = Path(
    os.environ.get("PERFMODEL_HARDWARE_DIR", HARDWARE_SPECS_DIR)
)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


Tflops = real_field(MAX_TFLOP_PER_S, MIN_RATE, exclusive_minimum=False)
"""A dense peak in TFLOP/s (``perfmodel.spec.limits``: finite, a GFLOP/s to an EFLOP/s)."""
GbPerS = real_field(MAX_GB_PER_S, MIN_RATE, exclusive_minimum=False)
"""A bandwidth in GB/s (``perfmodel.spec.limits``: finite, a MB/s to a PB/s)."""
Gib = real_field(MAX_GIB)
LatencyUs = real_field(MAX_LATENCY_US, 0.0, exclusive_minimum=False)


class DensePeaks(_Frozen):
    """Dense tensor-core peaks in TFLOP/s (never the 2:4-sparse datasheet figure)."""

    fp64: Tflops | None = None
    tf32: Tflops | None = None
    bf16: Tflops
    fp16: Tflops
    fp8: Tflops | None = None
    fp4: Tflops | None = None


class PowerLimitPoint(_Frozen):
    """A published dense BF16 peak of the same die at a lower power limit (a DVFS point)."""

    power_w: real_field(MAX_POWER_W)
    bf16_tflop_per_s: real_field(MAX_TFLOP_PER_S)


class GpuSpec(_Frozen):
    name: Name
    peak_dense_tflop_per_s: DensePeaks
    hbm_capacity_gib: Gib
    """Physical HBM capacity."""
    hbm_usable_gib: Gib
    """Allocatable by a training process."""
    hbm_bandwidth_gb_per_s: GbPerS
    l2_cache_mib: real_field(MAX_GIB)
    num_sms: int_field(MAX_COUNT)
    """Streaming multiprocessors (compute units on AMD)."""
    tdp_w: real_field(MAX_POWER_W)
    power_limit_point: PowerLimitPoint | None = None
    """The die's peak at a lower power limit, where one is published: a power cap between it and
    ``tdp_w`` sets the clock (``perfmodel.formulas.power.capped``); None: no cap can be modelled."""
    training_power_w: real_field(MAX_POWER_W) | None = None
    """Typical draw of one GPU while it trains an LLM (board power, W), where a measurement is
    published; None otherwise. It states what the GPU draws, not what a site provisions (that is
    ``tdp_w`` inside ``PowerSpec.node_power_w``) and not what the energy figures use (the node's
    maximum times ``CostModel.avg_power_frac``, a node-level fraction); no formula reads it."""

    @model_validator(mode="after")
    def _usable_le_physical(self) -> "GpuSpec":
        if self.hbm_usable_gib > self.hbm_capacity_gib:
            raise ValueError(
                f"hbm_usable_gib({self.hbm_usable_gib}) exceeds "
                f"hbm_capacity_gib({self.hbm_capacity_gib})"
            )
        if self.training_power_w is not None and self.training_power_w > self.tdp_w:
            raise ValueError(f"training_power_w({self.training_power_w:g}) exceeds tdp_w({self.tdp_w:g})")
        pt = self.power_limit_point
        if pt is not None and (pt.power_w >= self.tdp_w or pt.bf16_tflop_per_s > self.peak_dense_tflop_per_s.bf16):
            raise ValueError(f"power_limit_point ({pt.power_w:g} W, {pt.bf16_tflop_per_s:g} TFLOP/s) must lie below "
                             f"tdp_w({self.tdp_w:g}) and the bf16 peak({self.peak_dense_tflop_per_s.bf16:g})")
        return self

    def peak_flop_per_s(self, precision: str) -> float:
        """Dense peak of ``precision`` in FLOP/s; InputError if the GPU has none."""
        if precision not in PRECISIONS:
            raise InputError("precision", f"unknown precision {precision!r}; use one of {PRECISIONS}")
        tflops = getattr(self.peak_dense_tflop_per_s, precision)
        if tflops is None:
            raise InputError("precision", f"{self.name} has no dense {precision} tensor-core peak")
        return tflops * TERA

    def supports(self, precision: str) -> bool:
        return precision in PRECISIONS and getattr(self.peak_dense_tflop_per_s, precision) is not None

    @property
    def hbm_bytes(self) -> float:
        return self.hbm_capacity_gib * GIBI

    @property
    def hbm_usable_bytes(self) -> float:
        return self.hbm_usable_gib * GIBI

    @property
    def hbm_bandwidth_bytes_per_s(self) -> float:
        return self.hbm_bandwidth_gb_per_s * GIGA

    @property
    def l2_bytes(self) -> float:
        return self.l2_cache_mib * MEBI


class ScaleUpSpec(_Frozen):
    name: Name
    domain_size: int_field(MAX_NUM_GPUS)
    """GPUs in one scale-up (NVLink) domain: 8 for HGX, 72 for NVL72, 576 for eight NVL72 racks
    joined by a second tier of NVLink switches."""
    gpus_per_host: int_field(MAX_COUNT) | None = None
    """GPUs per host (the unit a scheduler allocates) where a domain spans several hosts:
    4 per GB200 compute tray. None: one host is the whole domain (HGX). See ``placement``."""
    gpus_per_rack: int_field(MAX_COUNT) | None = None
    """GPUs per rack where one domain spans several racks (GB200 NVL576: 8 racks of 72). None:
    the domain is one rack or less."""
    bandwidth_per_direction_gb_per_s: GbPerS
    """Per GPU, one direction."""
    inter_rack_bandwidth_per_direction_gb_per_s: GbPerS | None = None
    """Per GPU, one direction, to the domain's other racks, where the tier of switches that joins
    the racks has less bandwidth than the GPUs' own links (a taper). None: the full bandwidth;
    NVIDIA's NVLink Switch joins racks at full NVLink speed (nvidia.com 'NVLink and NVLink
    Switch'). The taper limits what leaves a rack: ``perfmodel.formulas.comm``."""
    in_network_reduction: StrictBool
    """NVLink SHARP (NVLS) or equivalent in-switch reduction."""
    latency_us: LatencyUs

    @model_validator(mode="after")
    def _racks(self) -> "ScaleUpSpec":
        D, r, g = self.domain_size, self.gpus_per_rack, self.gpus_per_host
        if r is not None:
            if r >= D or D % r:
                raise ValueError(f"gpus_per_rack({r}) must divide domain_size({D}) and be smaller: "
                                 "a domain of one rack or less has no gpus_per_rack")
            if g is not None and r % g:
                raise ValueError(f"gpus_per_host({g}) does not divide gpus_per_rack({r})")
        taper = self.inter_rack_bandwidth_per_direction_gb_per_s
        if taper is not None:
            if r is None:
                raise ValueError("inter_rack_bandwidth_per_direction_gb_per_s needs gpus_per_rack")
            if taper > self.bandwidth_per_direction_gb_per_s:
                raise ValueError(f"inter_rack_bandwidth_per_direction_gb_per_s({taper:g}) exceeds "
                                 f"bandwidth_per_direction_gb_per_s({self.bandwidth_per_direction_gb_per_s:g})")
        return self

    @property
    def bandwidth_bytes_per_s(self) -> float:
        return self.bandwidth_per_direction_gb_per_s * GIGA

    @property
    def inter_rack_bandwidth_bytes_per_s(self) -> float:
        """Per GPU, one direction, to other racks of the domain (the full link where untapered)."""
        taper = self.inter_rack_bandwidth_per_direction_gb_per_s
        return (self.bandwidth_per_direction_gb_per_s if taper is None else taper) * GIGA

    @property
    def latency_s(self) -> float:
        return self.latency_us * MICRO


class ScaleOutSpec(_Frozen):
    name: Name
    nics_per_gpu: real_field(MAX_NICS_PER_GPU)
    nic_bandwidth_gbit_per_s: real_field(MAX_GBIT_PER_S, MIN_RATE, exclusive_minimum=False)
    """Line rate of one NIC, one direction, in Gb/s (bits)."""
    latency_us: LatencyUs
    fabric: FabricSpec | None = None
    """The network the NICs plug into (``perfmodel.spec.fabric``); None: a non-blocking network,
    as the calibrated bandwidths and latencies measured it. A scenario's ``fabric:`` sets it."""

    @property
    def bandwidth_bytes_per_s(self) -> float:
        """Per GPU, one direction."""
        return self.nics_per_gpu * self.nic_bandwidth_gbit_per_s * GIGA / BITS_PER_BYTE

    @property
    def latency_s(self) -> float:
        return self.latency_us * MICRO


class HostLinkSpec(_Frozen):
    name: Name
    bandwidth_per_direction_gb_per_s: GbPerS

    @property
    def bandwidth_bytes_per_s(self) -> float:
        return self.bandwidth_per_direction_gb_per_s * GIGA


class PowerSpec(_Frozen):
    gpus_per_node: int_field(MAX_COUNT)
    """GPUs per node (per rack for NVL72 systems, with node_power_w the rack power)."""
    node_power_w: real_field(MAX_POWER_W)
    """Maximum power of one node (or rack) including CPUs, NICs and fans."""
    cooling: Literal["air", "liquid"] | None = None
    """How the node (rack) is cooled: ``liquid`` where its GPUs and CPUs sit on cold plates
    (a facility with liquid cooling), ``air`` otherwise; None where no source states it."""

    @property
    def power_per_gpu_w(self) -> float:
        return self.node_power_w / self.gpus_per_node


PRICE_CLASSES = ("hyperscaler", "neocloud")
"""Provider classes a price basis can hold across hardware: hyperscaler (AWS, Google Cloud, Azure,
Oracle) and neocloud (GPU specialists: Lambda, CoreWeave, Spheron, TensorWave, ...), each on
demand, per GPU-hour."""


class PriceSpec(_Frozen):
    cloud_usd_per_gpu_hour: real_field(MAX_USD)
    """The spec's listed rental price, of whatever provider class ``cloud_provider`` names."""
    cloud_provider: Name
    cloud_date: Name
    listed_class: Literal["hyperscaler", "neocloud", "reserved", "median", "placeholder"] = "placeholder"
    """What kind of price the listed one is: a hyperscaler's or a neocloud's on demand, a reserved
    (capacity-block) rate, a median across providers, or a placeholder (borrowed or assumed)."""
    purchase_usd_per_gpu: real_field(MAX_USD)
    """System purchase price divided by its GPUs (node, networking share excluded)."""
    hyperscaler_usd_per_gpu_hour: real_field(MAX_USD) | None = None
    """On-demand price at a hyperscaler, where a source gives one (None: none sourced)."""
    neocloud_usd_per_gpu_hour: real_field(MAX_USD) | None = None
    """On-demand price at a GPU-specialist cloud, where a source gives one (None: none sourced)."""
    reserved_1y_usd_per_gpu_hour: real_field(MAX_USD) | None = None
    """Price per GPU-hour reserved for one year (``perfmodel.spec.capacity``); None: none sourced."""
    reserved_3y_usd_per_gpu_hour: real_field(MAX_USD) | None = None
    """Price per GPU-hour reserved for three years; None: none sourced."""
    spot_usd_per_gpu_hour: real_field(MAX_USD) | None = None
    """Spot (preemptible) price per GPU-hour; None: none sourced (spot prices move by the hour)."""

    def class_usd_per_gpu_hour(self, price_class: str) -> float | None:
        """The on-demand price of ``price_class`` (``PRICE_CLASSES``), None when none is sourced."""
        return getattr(self, f"{price_class}_usd_per_gpu_hour")


class HardwareSpec(_Frozen):
    id: Name
    name: Name
    variant_of: Name | None = None
    """Id of the spec of the same die run by the same kernels, of which this is a variant (a
    power-capped or differently-memoried SKU). The variant inherits that spec's efficiencies
    (they are fractions of each SKU's own peaks) and its calibration profile, and validation
    reports it under that GPU."""
    availability: Literal["shipping", "announced"] = "shipping"
    """``announced``: the vendor has published figures but the system cannot be bought or rented
    yet (its notes cite the announcement); studies that recommend hardware leave it out unless
    the user names it (``perfmodel.studies.search.sizing.recommendable``)."""
    gpu: GpuSpec
    scale_up: ScaleUpSpec
    scale_out: ScaleOutSpec
    host_link: HostLinkSpec
    power: PowerSpec
    price: PriceSpec
    efficiency: Efficiencies
    sources: dict[str, str]
    """Dotted path (or a parent of it) -> citation, for every numeric field."""
    notes: str = ""

    @property
    def reference_id(self) -> str:
        """The GPU this spec counts as: its ``variant_of``, else its own id."""
        return self.variant_of or self.id

    @model_validator(mode="after")
    def _every_number_sourced(self) -> "HardwareSpec":
        missing = [p for p in _numeric_paths(self) if not _covered(p, self.sources)]
        if missing:
            raise ValueError(f"no source for {', '.join(missing[:5])}")
        return self


def _numeric_paths(model: BaseModel, prefix: str = "") -> list[str]:
    paths = []
    for name in type(model).model_fields:
        if name in ("sources", "efficiency", "id", "name", "notes"):
            continue
        value = getattr(model, name)
        path = f"{prefix}{name}"
        if isinstance(value, BaseModel):
            paths.extend(_numeric_paths(value, path + "."))
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and value is not None:
            paths.append(path)
    return paths


def _covered(path: str, sources: dict[str, str]) -> bool:
    parts = path.split(".")
    return any(".".join(parts[:i]) in sources for i in range(1, len(parts) + 1))


HARDWARE_ID_PATTERN = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
"""What a catalogue id looks like: the stem of ``hardware/<id>.yaml``. A reference that does not
match (a path, a URL) is never looked up, so no user string becomes a file name."""


@functools.lru_cache(maxsize=1)
def _catalogue() -> dict[str, Path]:
    return {p.stem: p for p in sorted(HARDWARE_DIR.glob("*.yaml")) if HARDWARE_ID_PATTERN.fullmatch(p.stem)}


def list_hardware_ids() -> list[str]:
    return sorted(_catalogue())


def reference_hardware_ids() -> list[str]:
    """The specs that are not a ``variant_of`` another: what a comparison starts from."""
    return [i for i in list_hardware_ids() if load_hardware(i).variant_of is None]


def _unknown(ref) -> InputError:
    shown = ref if len(str(ref)) <= 64 else f"{str(ref)[:61]}..."
    return InputError("hardware", f"unknown hardware {shown!r}; known ids: {', '.join(list_hardware_ids())}")


def parse_hardware(data: dict, origin: str = "hardware") -> HardwareSpec:
    """Validate a mapping (an inline or uploaded spec) into a HardwareSpec, or raise InputError.

    A variant (``variant_of``) names a catalogue spec by id; without an efficiency block it takes
    that spec's. Only catalogue specs can be referenced, and only ones that are not variants
    themselves, so a chain of references has length one and cannot loop."""
    ref = data.get("variant_of") if isinstance(data, dict) else None
    if ref is not None:
        if not isinstance(ref, str):
            raise InputError(f"{origin}.variant_of", f"must be a hardware id, got {reprlib.repr(ref)}")
        if ref == data.get("id"):
            raise InputError(f"{origin}.variant_of", f"points to the spec itself ({ref!r})")
        base = load_hardware(ref) if ref in _catalogue() else None
        if base is None:
            raise InputError(f"{origin}.variant_of", str(_unknown(ref)).split(": ", 1)[1])
        if base.variant_of is not None:
            raise InputError(f"{origin}.variant_of", f"{ref!r} is itself a variant of {base.variant_of!r}; "
                                                     f"name {base.variant_of!r}")
        if "efficiency" not in data:
            data = {**data, "efficiency": base.efficiency.model_dump()}
    return validated(HardwareSpec, data, origin)


@functools.lru_cache(maxsize=64)
def load_hardware(hw_id: str) -> HardwareSpec:
    """The catalogue spec ``hardware/<hw_id>.yaml``. Ids only: a path is an unknown id."""
    path = _catalogue().get(hw_id) if isinstance(hw_id, str) else None
    if path is None:
        raise _unknown(hw_id)
    return parse_hardware(read_data_file(path, "hardware"), origin=f"hardware({path.name})")


def load_hardware_file(path: str | Path) -> HardwareSpec:
    """A hardware YAML file named by the person running perfmodel (a command-line argument, or a
    path in their own scenario file), never by a link or an upload."""
    p = Path(path)
    return parse_hardware(read_data_file(p, "hardware"), origin=f"hardware({p.name})")
