"""The groups a job belongs to in the out-of-family table (``perfmodel.studies.observed.band_families``),
and the note for a group the band covered poorly when it was held out whole."""

from __future__ import annotations

POOR_COVERAGE = 0.7
"""Nested held-out 80% coverage below which a group's note warns: the bottom of the 70-90% range
issue 49 asks of every group of ten runs or more."""
BIN_FACTOR = 4
"""Width of the sequence-length and scale bins: a factor of 4 (2K-8K, 8K-32K, ...; 8-32 GPUs, ...)."""


def range_bin(x: int, base: int) -> str:
    """The bin of a sequence length (``base`` 2048) or GPU count (``base`` 8): [base 4^i, base 4^(i+1))."""
    if x < base:
        return f"1-{base - 1}"
    lo = base
    while x >= lo * BIN_FACTOR:
        lo *= BIN_FACTOR
    return f"{lo}-{lo * BIN_FACTOR - 1}"


def job_groups(ctx) -> dict:
    """Dimension -> the job's group in it, as the out-of-family table holds groups out."""
    return {"stack": ctx.stack, "family": ctx.family, "generation": ctx.generation,
            "seq_length": range_bin(ctx.seq_length, 2048), "scale": range_bin(ctx.num_gpus, 8)}


TITLES = {"stack": "stack", "family": "model family", "generation": "GPU generation",
          "seq_length": "sequence-length bin", "scale": "GPU-count bin"}


def poor_coverage_text(ctx, poor: dict | None) -> str:
    """'; ...' naming each group of the job the band covered poorly when held out whole ('' for none)."""
    hits = [(d, g, *(poor or {}).get(d, {})[g]) for d, g in job_groups(ctx).items() if g in (poor or {}).get(d, {})]
    return "".join(f"; held out whole, {TITLES[d]} {g}'s {n} runs were {c:.0%} inside the 80% band: the model "
                   "errs there more than the band says (docs/validation.md, 'Out of family')" for d, g, n, c in hits)
