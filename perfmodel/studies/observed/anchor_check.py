"""How well anchored what-ifs predict published runs (``scripts/anchored_whatifs.py``).

For every group of published runs that share a source (publication and release), a GPU and a
model, each run in turn is the anchor: its compute factor is fitted (``perfmodel.studies.observed.anchor``)
and every other run of the group is predicted with it. The error of an anchored what-if is
predicted / measured tokens/s per GPU - 1 on the target; the plain ratio error (no anchor: the
predicted speed-up, ``perfmodel.studies.observed.validation.ratio_error``) is kept beside it. Quantiles of
the signed error make the band of an anchored prediction (``perfmodel/data/anchored_band.yaml``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from perfmodel.engine.rules import resolve
from perfmodel.spec.errors import InputError, read_data_file
from perfmodel.spec.paths import DATA_DIR
from perfmodel.spec.profile import AUTO, ProfileChoice, efficiencies_for
from perfmodel.spec.scenario import hardware_of, parse_scenario, scenario_to_dict
from perfmodel.studies.observed.anchor import anchored_step_s, fit_anchor
from perfmodel.studies.observed.validation import CaseResult, ratio_error, run_case

BAND_FILE = DATA_DIR / "anchored_band.yaml"
BAND_FORMAT = "perfmodel-anchored-band/1"
BAND_QUANTILES = (0.1, 0.5, 0.9)
"""p10, p50 and p90: the band holds 80% of the published anchored what-ifs."""
CHANGE_NAMES = {"parallelism": "layout", "micro_batch_size": "layout", "software": "software", "hardware": "hardware",
                "num_gpus": "num_gpus", "global_batch_size": "global_batch_size", "seq_length": "seq_length",
                "precision": "precision", "recompute": "recompute", "model": "model"}
"""Scenario field -> the kind of change a what-if makes (a layout is its parallelism and micro-batch)."""


@dataclass(frozen=True)
class AnchoredPair:
    source: str
    gpu: str
    model: str
    anchor: str
    target: str
    changed: tuple[str, ...]
    """What differs between the anchor's scenario and the target's (``CHANGE_NAMES``)."""
    compute_factor: float
    error: float
    """Anchored predicted / measured tokens/s per GPU of the target, - 1."""
    ratio_error: float
    """The unanchored predicted speed-up's error, for comparison."""

    def to_dict(self) -> dict:
        return {**self.__dict__, "changed": list(self.changed)}


def _mean_median(errors) -> dict:
    a = np.abs(np.asarray(list(errors), dtype=float))
    return {"pairs": int(a.size), "mean": float(a.mean()) if a.size else float("nan"),
            "median": float(np.median(a)) if a.size else float("nan")}


@dataclass(frozen=True)
class AnchoredWhatIfs:
    pairs: tuple[AnchoredPair, ...]
    unanchored: tuple[str, ...]
    """Anchors no factor fitted (their what-ifs are left out), each with the reason."""

    def summary(self) -> dict:
        by_gpu: dict = {}
        by_change: dict = {}
        for p in self.pairs:
            by_gpu.setdefault(p.gpu, []).append(p.error)
            by_change.setdefault("+".join(p.changed) or "nothing", []).append(p.error)
        signed = np.array([p.error for p in self.pairs])
        return {"overall": _mean_median(signed), "ratio_error": _mean_median(p.ratio_error for p in self.pairs),
                "same_software": _mean_median(p.error for p in self.pairs if "software" not in p.changed),
                "by_gpu": {g: _mean_median(e) for g, e in sorted(by_gpu.items())},
                "by_change": {c: _mean_median(e) for c, e in sorted(by_change.items(), key=lambda kv: -len(kv[1]))},
                "error_quantiles": {f"p{round(q * 100)}": float(np.quantile(signed, q)) for q in BAND_QUANTILES}
                if signed.size else {}, "groups": len({(p.source, p.gpu, p.model) for p in self.pairs}),
                "unanchored": list(self.unanchored), "held_out_coverage": held_out_coverage(self.pairs)}

    def to_dict(self) -> dict:
        return {**self.summary(), "pair_rows": [p.to_dict() for p in self.pairs]}


def held_out_coverage(pairs) -> dict:
    """Share of pairs whose error lies within the p10-p90 of the pairs of every other source
    (leave-one-source-out), overall and by whether the anchor's software or precision differs from
    the target's: how the anchored band does on a source it never saw, and outside its stack."""
    hits: dict = {"all": [], "same_software": [], "software_changed": [], "precision_changed": []}
    for source in sorted({p.source for p in pairs}):
        rest = np.array([p.error for p in pairs if p.source != source])
        if rest.size == 0:
            continue
        lo, hi = np.quantile(rest, BAND_QUANTILES[0]), np.quantile(rest, BAND_QUANTILES[-1])
        for p in pairs:
            if p.source == source:
                hit = bool(lo <= p.error <= hi)
                hits["all"].append(hit)
                hits["software_changed" if "software" in p.changed else "same_software"].append(hit)
                if "precision" in p.changed:
                    hits["precision_changed"].append(hit)
    return {k: {"pairs": len(v), "coverage": float(np.mean(v)) if v else None} for k, v in hits.items()}


def _changed(a: dict, b: dict) -> tuple[str, ...]:
    keys = (set(a) | set(b)) - {"name", "training_tokens"}
    return tuple(sorted({CHANGE_NAMES.get(k, k) for k in keys if a.get(k) != b.get(k)}))


def anchored_what_ifs(cases: list[dict], profile: ProfileChoice = AUTO) -> AnchoredWhatIfs:
    """Every ordered pair (anchor, target) of every group of ``cases`` that share a source, a GPU
    and a model, the target predicted with the anchor's fitted compute factor."""
    rows = []
    for case in cases:
        result = run_case(case, profile)
        if isinstance(result, CaseResult):
            sc = parse_scenario(case["scenario"])
            r = resolve(sc, efficiencies_for(hardware_of(sc), profile)[0])
            measured_step = sc.global_batch_size * sc.seq_length / (result.measured_tokens_per_s_per_gpu * sc.num_gpus)
            rows.append((result, r, measured_step, scenario_to_dict(sc)))
    groups: dict = {}
    for row in rows:
        res = row[0]
        groups.setdefault((res.source, res.gpu, res.model), []).append(row)
    pairs, unanchored = [], []
    for (source, gpu, model), members in groups.items():
        for a in members if len(members) > 1 else ():
            try:
                anchor = fit_anchor([(a[0].id, a[1], a[2])])
            except InputError as exc:
                unanchored.append(f"{a[0].id}: {exc.reason}")
                continue
            for b in members:
                if b is a:
                    continue
                predicted_step = anchored_step_s(b[1], anchor.factors)
                error = b[2] / predicted_step - 1.0      # tokens/s per GPU: predicted / measured - 1
                pairs.append(AnchoredPair(source, gpu, model, a[0].id, b[0].id, _changed(a[3], b[3]),
                                          anchor.factors["compute"], error, ratio_error(b[0], a[0])))
    return AnchoredWhatIfs(pairs=tuple(pairs), unanchored=tuple(unanchored))


def load_band(path: Path = BAND_FILE) -> dict:
    """The stored quantiles of the published anchored what-if error ({p10, p50, p90}) and where
    they come from."""
    data = read_data_file(path, "anchored band")
    if not isinstance(data, dict) or data.get("format") != BAND_FORMAT:
        raise InputError("anchored band", f"{Path(path).name} is not a {BAND_FORMAT} file")
    return data
