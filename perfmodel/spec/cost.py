"""How a GPU-hour is priced: the user's choices (cloud rental or owned hardware), with sourced
defaults. The formulas that turn them into dollars and energy are ``perfmodel.formulas.cost``."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from perfmodel.spec.capacity import CapacityClass, Preemption
from perfmodel.spec.errors import validated
from perfmodel.spec.limits import MAX_RATIO, MAX_USD, MAX_YEARS, MIN_YEARS, real_field

# --- sourced defaults --------------------------------------------------------------------
AMORTISATION_YEARS_DEFAULT = 4.0
"""Server life before 2022 at the hyperscalers: Microsoft (Q1 FY2023 10-Q: "increase the
estimated useful lives of both server and network equipment from four years to six years",
July 2022), Meta (2022 10-K: four years, extended to 4.5 then 5 in 2022), Amazon (2022 10-K:
servers from four years to five, effective 2022). Amazon's 2024 10-K shortened a subset of
servers from six to five years from 2025, citing the pace of AI/ML technology. GPUs are
superseded every ~2 years, so the older, shorter 4-year life is taken as the default."""
UTILISATION_FRAC_DEFAULT = 0.80
"""Meta's RSC-1 and RSC-2 research clusters ran at about 83% and 85% utilisation over 11
months (Kokolis et al. 2025, "Revisiting Reliability in Large-Scale Machine Learning
Research Clusters", arXiv 2410.21680); rounded down to 0.80."""
PUE_GENERAL = 1.25
"""Non-hyperscaler data centre (Cottier et al. 2024 app. A.4, citing SemiAnalysis 2024)."""
PUE_HYPERSCALER = 1.10
"""Hyperscaler data centre (Cottier et al. 2024 app. A.4, citing Patterson et al. 2021
table 4 and Meta's sustainability page)."""
USD_PER_KWH_DEFAULT = 0.08
"""US average industrial electricity price, 2023 (EIA Electric Power Monthly table 5.6.A;
REFERENCES.md 'Cost')."""
NETWORK_OPS_OVERHEAD_FRAC_DEFAULT = 0.23
"""Cluster-level (server-to-server) networking is ~19% of cluster hardware cost for an H100
SuperPOD, i.e. a server-to-cluster factor of 1/(1-0.19) = 1.23 on the server price
(Cottier et al. 2024 app. A.1). Covers networking only; staff and facility capex are not
included -- raise it to include them."""
AVG_POWER_FRAC_DEFAULT = 0.75
"""Average node draw during training over the node's maximum power (``PowerSpec.node_power_w``),
75% (Cottier et al. 2024 app. A.4, aggregating the DGX SuperPOD data-centre design guide,
Patterson et al. 2021 and Barroso et al. 2018). Measured on 8-GPU H100 nodes: compute-intensive
training at 76% of the DGX H100's 10.2 kW (Newkirk et al. 2025, arXiv 2506.14551), at most about
8.4 kW (82%) training Llama2-13b (Latif et al. 2024, arXiv 2412.08602). A node-level fraction,
the same for every hardware; a GPU's own measured draw is ``GpuSpec.training_power_w``."""


class CostModel(BaseModel):
    """How a GPU-hour is priced. Inputs are validated; unknown keys are errors."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: Literal["cloud", "tco"] = "cloud"
    """``cloud``: rent at ``usd_per_gpu_hour``; ``tco``: own the hardware (capex + energy)."""
    cloud_class: Literal["listed", "hyperscaler", "neocloud"] = "listed"
    """Which rental price of the hardware spec: ``listed``, the spec's own price (its provider
    class differs between specs); ``hyperscaler`` or ``neocloud``, the on-demand price of that
    provider class for every spec, so that hardware compares on one basis (a spec without a
    sourced price of the class cannot be priced on it, and says so)."""
    usd_per_gpu_hour: real_field(MAX_USD) | None = None
    """Your own rental price, for every hardware; None uses the spec's price of ``cloud_class``."""
    purchase_usd_per_gpu: real_field(MAX_USD) | None = None
    """Purchase price override (server price / GPUs); None uses the hardware spec's."""
    amortisation_years: real_field(MAX_YEARS, MIN_YEARS, exclusive_minimum=False) = AMORTISATION_YEARS_DEFAULT
    utilisation_frac: real_field(1.0) = UTILISATION_FRAC_DEFAULT
    """Fraction of the amortisation life the GPU does paid-for work."""
    pue: real_field(MAX_RATIO, 1.0, exclusive_minimum=False) = PUE_GENERAL
    """Power usage effectiveness (facility / IT power); 1.1 for a hyperscaler."""
    usd_per_kwh: real_field(MAX_USD, 0.0, exclusive_minimum=False) = USD_PER_KWH_DEFAULT
    network_ops_overhead_frac: real_field(MAX_RATIO, 0.0, exclusive_minimum=False) = NETWORK_OPS_OVERHEAD_FRAC_DEFAULT
    """Cluster networking (and operations) cost as a fraction of the server purchase price."""
    avg_power_frac: real_field(1.0) = AVG_POWER_FRAC_DEFAULT
    """Average node draw during training as a fraction of its maximum power."""
    capacity: CapacityClass = "on_demand"
    """How rented GPUs are held (``perfmodel.spec.capacity``): on demand (priced by
    ``cloud_class``), reserved for 1 or 3 years, or spot (preemptible: ``preemption`` enters
    goodput). A class whose price the hardware spec lacks is unavailable unless you give
    ``usd_per_gpu_hour``."""
    preemption: Preemption = Field(default_factory=Preemption)
    """Spot preemption rate and notice (used only when ``capacity`` is preemptible)."""
    reserved_1y_usd_per_gpu_hour: real_field(MAX_USD) | None = None
    """Your one-year reserved price per GPU-hour, for every hardware (None: the spec's, none sourced)."""
    reserved_3y_usd_per_gpu_hour: real_field(MAX_USD) | None = None
    """Your three-year reserved price per GPU-hour (None: the spec's, none sourced)."""
    spot_usd_per_gpu_hour: real_field(MAX_USD) | None = None
    """Your spot price per GPU-hour (None: the spec's, none sourced)."""


def parse_cost_model(data: dict) -> CostModel:
    """Validate a mapping into a CostModel, or raise a one-line InputError."""
    return validated(CostModel, data, "cost", "must be a mapping")
