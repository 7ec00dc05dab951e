"""Prices in words: a GPU-hour's price with its basis and source, for the CLI and the app."""

from __future__ import annotations

from perfmodel.present import fmt

BASIS_WORDS = {
    "listed": "the spec's listed rental price",
    "hyperscaler": "hyperscaler on demand",
    "neocloud": "neocloud on demand",
    "own": "your price",
    "tco": "owned (TCO: capital, networking, energy)",
}
"""What each price basis (``PriceQuote.basis``) means, in words."""
LISTED_CLASS_WORDS = {"hyperscaler": "a hyperscaler's", "neocloud": "a neocloud's", "reserved": "a reserved rate",
                      "median": "a median across providers", "placeholder": "a placeholder"}
"""What kind of price a spec's listed one is (``PriceSpec.listed_class``)."""


def price_text(quote) -> str:
    """'$4.54/GPU-h, neocloud on demand (spheron.network ...)'."""
    basis = BASIS_WORDS.get(quote.basis, quote.basis)
    if quote.basis == "tco":
        basis += f", purchase {fmt.usd(quote.purchase_usd_per_gpu)} per GPU"
    return f"{fmt.usd_per_gpu_hour(quote.usd_per_gpu_hour)}, {basis} ({quote.source})"


def mixed_classes_text(listed_class_by_hardware: dict[str, str]) -> str:
    """A warning when hardware priced at their listed prices mix provider classes (hardware id ->
    ``PriceSpec.listed_class``); '' when the prices are of one kind."""
    kinds: dict[str, list[str]] = {}
    for hw_id, kind in listed_class_by_hardware.items():
        kinds.setdefault(kind, []).append(hw_id)
    if len(kinds) < 2:
        return ""
    parts = "; ".join(f"{LISTED_CLASS_WORDS.get(k, k)} for {', '.join(ids)}" for k, ids in sorted(kinds.items()))
    return (f"The listed prices are of different kinds ({parts}), so costs do not compare on one basis: "
            f"choose a provider class (hyperscaler or neocloud), your own price or TCO.")
