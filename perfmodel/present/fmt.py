"""The only place that turns numbers into text for people (CLI tables, app labels)."""

from __future__ import annotations

import math

_SI = [(1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")]
_BIN = [(2**50, "PiB"), (2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"), (1, "B")]


YEAR_S = 365.25 * 86400
"""A Julian year: the unit of times of ten years or more."""


def seconds(x: float) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    a = abs(x)
    if a >= YEAR_S * 1e6:  # past a million years, digits say nothing: '2.27e+12 years'
        return f"{x / YEAR_S:.3g} years"
    if a >= YEAR_S * 10:   # a 100T model on today's GPUs: centuries, not 317280.4 d
        return f"{x / YEAR_S:,.0f} years"
    if a >= 86400 * 2:
        return f"{x / 86400:.1f} d"
    if a >= 7200:
        return f"{x / 3600:.1f} h"
    if a >= 120:
        return f"{x / 60:.1f} min"
    if a < 1:   # the unit of the 3 digits shown: 0.9999 ms is '1 ms', not '1e+03 us'
        x = float(f"{x:.3g}")
        a = abs(x)
    if a >= 1:
        return f"{x:.3g} s"
    if a >= 1e-3:
        return f"{x * 1e3:.3g} ms"
    if a >= 1e-6:
        return f"{x * 1e6:.3g} us"
    return f"{x * 1e9:.3g} ns" if a else "0 s"


def si(x: float, unit: str = "") -> str:
    if x is None or not math.isfinite(x):
        return "-"
    for scale, prefix in _SI:
        if abs(x) >= scale:
            return f"{x / scale:.3g} {prefix}{unit}".rstrip()
    return f"{x:.3g} {unit}".rstrip()


def compact(x: float) -> str:
    """A count with its SI prefix and no space: '16.8M', '2.1k' (for tokens, GPUs, layouts)."""
    if x is None or not math.isfinite(x):
        return "-"
    for scale, prefix in _SI:
        if abs(x) >= scale:
            return f"{x / scale:.3g}{prefix}"
    return f"{x:.3g}"


def usd_per_gpu_hour(x: float | None) -> str:
    """A price of one GPU-hour: '$4.54/GPU-h'."""
    return "-" if x is None else f"${x:.2f}/GPU-h"


def usd_per_million_tokens(cost_usd: float | None, tokens: float | None) -> str:
    """What a million trained tokens cost: '$0.46/M tokens'."""
    if cost_usd is None or not tokens:
        return "-"
    return f"${cost_usd / tokens * 1e6:.3g}/M tokens"


def energy_kwh(x: float) -> str:
    """Energy given in kWh, printed with an SI prefix on Wh ("293 MWh")."""
    return "-" if x is None else si(x * 1e3, "Wh")


def bytes_binary(x: float) -> str:
    for scale, name in _BIN:
        if abs(x) >= scale:
            return f"{x / scale:.3g} {name}"
    return f"{x:.3g} B"


def percent(x: float) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{100 * x:.1f}%"


def usd(x: float) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    if abs(x) >= 1e15:     # past a thousand trillion: '$3.16e+16', not 16 digits of T
        return f"${x:.3g}"
    if abs(x) >= 1e12:
        return f"${x / 1e12:,.2f}T"
    if abs(x) >= 1e9:
        return f"${x / 1e9:.2f}B"
    if abs(x) >= 1e6:
        return f"${x / 1e6:.2f}M"
    if abs(x) >= 1e3:
        return f"${x / 1e3:.1f}k"
    return f"${x:.2f}"


def band(b: dict | None, formatter) -> str:
    """An error band's p10-p90 range ('' without one)."""
    return "" if not b else f"{formatter(b['p10'])} - {formatter(b['p90'])}"


def probability(x: float | None) -> str:
    """A probability read from an error band, whose tails it does not claim to know: at its ends
    (0.05, 0.95) it is shown as a bound."""
    if x is None:
        return "-"
    if x >= 0.95:
        return ">=95%"
    if x <= 0.05:
        return "<=5%"
    return f"{100 * x:.0f}%"


def table(rows: list[list[str]], header: list[str] | None = None) -> str:
    """Plain fixed-width table; the first column left-aligned, the rest right-aligned."""
    all_rows = ([header] if header else []) + rows
    widths = [max(len(str(r[i])) for r in all_rows) for i in range(len(all_rows[0]))]
    lines = []
    for j, r in enumerate(all_rows):
        cells = [str(c).ljust(widths[i]) if i == 0 else str(c).rjust(widths[i]) for i, c in enumerate(r)]
        lines.append("  ".join(cells))
        if header and j == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)
