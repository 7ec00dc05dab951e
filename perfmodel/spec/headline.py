"""Hardware from a few headline numbers: a catalogue spec with its peak, memory, scale-up and
scale-out figures and its price replaced by yours, as an inline spec (never a file).

Everything not named here (latencies, power, host link, the efficiencies, the error band) is the
base spec's; the spec is a ``variant_of`` the base's GPU, so the calibration it borrows is said.
The other precisions' peaks keep their ratio to BF16 (dense FP8 = 2 x BF16 on Hopper and
Blackwell; REFERENCES.md 'Dense peaks'); the usable HBM keeps the base's reserve (capacity less
usable)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from perfmodel.spec.hardware import HardwareSpec, load_hardware, parse_hardware
from perfmodel.spec.limits import (
    MAX_GB_PER_S,
    MAX_GBIT_PER_S,
    MAX_GIB,
    MAX_NUM_GPUS,
    MAX_TFLOP_PER_S,
    MAX_USD,
    Name,
    int_field,
    real_field,
)

YOURS = "headline number entered by the user (perfmodel.spec.headline)"


class Headline(BaseModel):
    """The headline numbers of a GPU system. Unknown keys are errors."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    base: Name
    """Catalogue id whose other figures (latencies, power, efficiencies) are kept."""
    name: Name = "custom GPU"
    peak_bf16_tflop_per_s: real_field(MAX_TFLOP_PER_S)
    """Dense BF16 peak per GPU (never the 2:4-sparse datasheet figure)."""
    hbm_capacity_gib: real_field(MAX_GIB)
    hbm_bandwidth_gb_per_s: real_field(MAX_GB_PER_S)
    scale_up_domain_size: int_field(MAX_NUM_GPUS)
    """GPUs in one NVLink (scale-up) domain."""
    scale_up_gb_per_s: real_field(MAX_GB_PER_S)
    """Scale-up bandwidth per GPU, one direction (half the 'bidirectional' figure)."""
    nic_gbit_per_s: real_field(MAX_GBIT_PER_S)
    """Scale-out line rate per GPU, one direction, in Gb/s (bits)."""
    usd_per_gpu_hour: real_field(MAX_USD)


def headline_spec(h: Headline) -> HardwareSpec:
    """The base spec with the headline numbers put in, validated as an inline spec."""
    base = load_hardware(h.base)
    d = base.model_dump(mode="json", exclude_none=True)
    ratio = h.peak_bf16_tflop_per_s / base.gpu.peak_dense_tflop_per_s.bf16
    d["gpu"]["peak_dense_tflop_per_s"] = {k: round(v * ratio, 9) for k, v in
                                         d["gpu"]["peak_dense_tflop_per_s"].items()}
    reserve = base.gpu.hbm_capacity_gib - base.gpu.hbm_usable_gib
    d["gpu"].update(hbm_capacity_gib=h.hbm_capacity_gib, hbm_usable_gib=max(h.hbm_capacity_gib - reserve,
                                                                            h.hbm_capacity_gib / 2),
                    hbm_bandwidth_gb_per_s=h.hbm_bandwidth_gb_per_s)
    up = d["scale_up"]
    up.update(domain_size=h.scale_up_domain_size, bandwidth_per_direction_gb_per_s=h.scale_up_gb_per_s)
    for k in ("gpus_per_host", "gpus_per_rack"):
        if k in up and h.scale_up_domain_size % up[k]:
            del up[k]
    d["scale_out"].update(nics_per_gpu=1, nic_bandwidth_gbit_per_s=h.nic_gbit_per_s)
    d["price"] = {"cloud_usd_per_gpu_hour": h.usd_per_gpu_hour, "cloud_provider": "your price",
                  "cloud_date": "-", "listed_class": "placeholder",
                  "purchase_usd_per_gpu": base.price.purchase_usd_per_gpu}
    mine = {"gpu.peak_dense_tflop_per_s": f"{YOURS}: BF16; the other precisions at the base's ratio to BF16",
            "gpu.hbm_capacity_gib": YOURS, "gpu.hbm_bandwidth_gb_per_s": YOURS,
            "gpu.hbm_usable_gib": f"{YOURS}: capacity less {h.base}'s reserve",
            "scale_up.domain_size": YOURS, "scale_up.bandwidth_per_direction_gb_per_s": YOURS,
            "scale_out.nics_per_gpu": YOURS, "scale_out.nic_bandwidth_gbit_per_s": YOURS,
            "price.cloud_usd_per_gpu_hour": YOURS,
            "price.purchase_usd_per_gpu": f"{h.base}'s: {base.sources.get('price.purchase_usd_per_gpu', '')}"}
    d["sources"] = {k: v for k, v in d["sources"].items() if not k.startswith("price.")} | mine
    d.update(id=f"custom-{h.base}", name=h.name, variant_of=base.variant_of or base.id,
             notes=f"Headline numbers over {h.base}; everything else (latencies, power, efficiencies) is {h.base}'s.")
    return parse_hardware(d, origin="headline hardware")


def headline_of(hw: HardwareSpec) -> dict:
    """A spec's headline numbers (the form's starting values)."""
    return {"peak_bf16_tflop_per_s": hw.gpu.peak_dense_tflop_per_s.bf16, "hbm_capacity_gib": hw.gpu.hbm_capacity_gib,
            "hbm_bandwidth_gb_per_s": hw.gpu.hbm_bandwidth_gb_per_s,
            "scale_up_domain_size": hw.scale_up.domain_size,
            "scale_up_gb_per_s": hw.scale_up.bandwidth_per_direction_gb_per_s,
            "nic_gbit_per_s": hw.scale_out.nics_per_gpu * hw.scale_out.nic_bandwidth_gbit_per_s,
            "usd_per_gpu_hour": hw.price.cloud_usd_per_gpu_hour}
