"""Which hardware a study may recommend without being asked: not hardware that is announced but
cannot be bought or rented yet (``HardwareSpec.availability``), and not hardware whose price is a
placeholder (``PriceSpec.listed_class``), since a recommendation is a buying decision. A user who
names such hardware gets it sized, flagged."""

from __future__ import annotations

from perfmodel.spec.cost import CostModel
from perfmodel.spec.hardware import HardwareSpec, load_hardware


def placeholder_price(hw: HardwareSpec, cost_model: CostModel) -> bool:
    """Sizing would charge the spec's placeholder price (``PriceSpec.listed_class``): renting at
    the listed price, with no price of the user's own."""
    return (cost_model.mode == "cloud" and cost_model.usd_per_gpu_hour is None
            and cost_model.cloud_class == "listed" and hw.price.listed_class == "placeholder")


def not_recommended_reason(hw: HardwareSpec, cost_model: CostModel) -> str:
    """Why sizing leaves a hardware type out unless the user names it ('' when it does not): it
    is announced, not shipped (``HardwareSpec.availability``), or priced by a placeholder."""
    why = ["announced, not shipped"] if hw.availability == "announced" else []
    return ", ".join(why + (["placeholder price"] if placeholder_price(hw, cost_model) else []))


def recommendable(hardware_ids, cost_model: CostModel) -> tuple[list[str], dict[str, str]]:
    """(the ids sizing may recommend unasked, {id left out: why}) of ``hardware_ids``."""
    why = {i: not_recommended_reason(load_hardware(i), cost_model) for i in hardware_ids}
    return [i for i in hardware_ids if not why[i]], {i: w for i, w in why.items() if w}

