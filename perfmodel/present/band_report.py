"""The error band's section of the validation report: how the band is fitted, each stratum's band,
and its coverage, nominal against measured, on sources it was not fitted on."""

from __future__ import annotations

import math

from perfmodel.engine.band_groups import POOR_COVERAGE
from perfmodel.present import fmt
from perfmodel.studies.observed.band_families import band_file_data
from perfmodel.studies.observed.bands import LEVELS, NOMINAL, coverage_table, residuals

GROUP_TITLES = {"overall": "", "generation": "GPU generation", "gpu": "GPU", "kind": "dense or MoE",
                "stratum": "stratum"}


def _at(quantiles, level: float) -> float:
    import numpy as np
    return float(np.interp(level, LEVELS, quantiles))


def band_section(report) -> list[str]:
    """Markdown lines of the 'Error band' section."""
    rows = residuals(report)
    if len({r.source for r in rows}) < 2:
        return ["", "## Error band", "", "Held-out coverage needs the runs of two sources or more."]
    cov = coverage_table(rows)
    data = band_file_data(report)
    sources = data["sources"]
    lines = ["", "## Error band", "",
             "Every prediction carries an 80% band (p10 to p90) read from the residuals above, r = log(predicted / "
             "measured) tokens/s per GPU, for runs like the one predicted (`perfmodel/studies/observed/bands.py`). The runs of "
             "one software stack in one source on one GPU generation (a stack at one maturity on one architecture) "
             "have an offset, the median r of those runs; a new job's r is an offset of its GPU generation plus the "
             "scatter of runs about their stack's offset, dense or MoE as the job is (MoE runs scatter about 2.8 "
             "times as widely), every published run weighing the same; a generation with fewer than two such stacks "
             "takes every stack's offsets. "
             "`perfmodel validate perfmodel/data/published_runs.yaml --fit-bands perfmodel/data/error_bands.yaml` "
             "writes the band table "
             "(`perfmodel/data/error_bands.yaml`) from the current model; a test keeps the two equal.", "",
             f"Coverage is measured on sources the band never saw: fitted on {sources - 1} of the {sources} sources and "
             "tested on the runs of the one left out, for each source in turn. Nominal against measured:", "",
             "| group | runs | 50% band (p25-p75) | 80% band (p10-p90) | 90% band (p5-p95) |",
             "|---|---:|---:|---:|---:|"]
    all_ = cov["overall"]["all"]
    lines.append(f"| **all** | {all_['cases']} | {fmt.percent(all_[0.5])} | **{fmt.percent(all_[0.8])}** | "
                 f"{fmt.percent(all_[0.9])} |")
    for group in ("generation", "kind", "gpu", "stratum"):
        for label, c in cov[group].items():
            lines.append(f"| {GROUP_TITLES[group]} {label} | {c['cases']} | {fmt.percent(c[0.5])} | "
                         f"{fmt.percent(c[0.8])} | {fmt.percent(c[0.9])} |")
    lines += ["", "The band of each stratum, fitted on every source: the measured tokens/s per GPU as a multiple of "
              "the prediction (time and cost scale by the inverse). A GPU generation with no published runs takes the "
              "`any` stratum (offsets of every generation).", "",
              "| stratum | software stacks | runs | p10 | p50 | p90 | held-out coverage of the 80% band |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    low, high = NOMINAL[0.8]
    for name, s in data["strata"].items():
        q = s["log_ratio"]
        held = "" if s["held_out_coverage"] is None else fmt.percent(s["held_out_coverage"])
        lines.append(f"| {name} | {s['software_stacks']} | {s['cases']} | {math.exp(-_at(q, high)):.2f}x | "
                     f"{math.exp(-_at(q, 0.5)):.2f}x | {math.exp(-_at(q, low)):.2f}x | {held} |")
    return lines + out_of_family_section(rows, data["out_of_family"])


SCHEME_TITLES = {"source": "source", "stack": "software stack", "family": "model family",
                 "generation": "GPU generation", "seq_length": "sequence length", "scale": "GPU count"}
MIN_RUNS_SHOWN = 10
"""Groups with fewer runs are counted in their scheme's total, not shown on a line of their own."""


def out_of_family_section(rows, oof: dict) -> list[str]:
    """Markdown lines of 'Out of family': nested leave-one-group-out coverage and the widening."""
    from perfmodel.studies.observed.band_families import out_of_family_table
    table = out_of_family_table(rows)
    k = oof["widening"]
    lines = ["", "### Out of family", "",
             "Held out by whole software stacks, model families (dense, coarse MoE, fine-grained MoE), GPU "
             "generations, sequence-length bins and GPU-count bins (a factor 4 wide), not only by source "
             "(`perfmodel/studies/observed/band_families.py`). A job of a stack, family or generation no published run has "
             "takes the band plus a random offset, normal with mean 0 and the spread by which the held-out groups of "
             "that kind sat off the band fitted without them beyond what the band already allows for (a moment "
             "estimate, each group weighing the same: " + "; ".join(f"{SCHEME_TITLES[d]} {v:.2f}"
                                                                     for d, v in oof["spread"].items()) +
             " in r); one beyond the "
             "validated sequence lengths or GPU counts has its band widened about its median by a factor fitted by "
             "holding the end groups out (" + ", ".join(f"{SCHEME_TITLES[d]} x{v:.2f}" for d, v in k.items()) +
             "). `perfmodel predict` says which family the band comes from and where a job lies outside the "
             "validated runs (`band_note`), and names a group of the job that the band covered below "
             f"{POOR_COVERAGE:.0%} when held out whole (the model is biased there; the band does not hide it). The coverage below is nested: each "
             "held-out group's band, spreads and "
             "factors were fitted without it; 'outside' counts the runs that lay outside the other runs in some "
             "dimension. Median half-width: half the 80% band's width as a share of the rate. Groups of fewer than "
             f"{MIN_RUNS_SHOWN} runs count in their scheme's total only.", "",
             "| held out | group | runs | outside | 50% band | 80% band | 90% band | median half-width |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for scheme, groups in table.items():
        for label, c in groups.items():
            if label != "all" and c["cases"] < MIN_RUNS_SHOWN:
                continue
            name = "**all**" if label == "all" else label[:60]
            lines.append(f"| {SCHEME_TITLES[scheme]} | {name} | {c['cases']} | {c['widened']} | {fmt.percent(c[0.5])} | "
                         f"{fmt.percent(c[0.8])} | {fmt.percent(c[0.9])} | ±{fmt.percent(c['median_half_width'])} |")
    return lines
