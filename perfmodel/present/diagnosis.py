"""A diagnosis, a sensitivity and an anchored prediction in words (CLI text; the app reuses the
sentences)."""

from __future__ import annotations

from perfmodel.present import fmt
from perfmodel.studies.observed.diagnose import PART_THRESHOLD, Diagnosis
from perfmodel.studies.observed.symptoms import PATTERNS, SYMPTOM, TERMS
from perfmodel.studies.views.sensitivity import RESOURCE_LENS, Sensitivity

LEVER_WORDS = {
    "peak_flops": "the kernels' FLOP/s", "hbm_bandwidth": "HBM bandwidth", "scale_up_bandwidth": "NVLink bandwidth",
    "scale_out_bandwidth": "the network's bandwidth", "latency": "collective latency", "host_overhead": "host dispatch",
    "input_pipeline": "the data loader", "pipeline_bubble": "the pipeline schedule",
}
RESOURCE_WORDS = {
    "peak_flops": "peak FLOP/s", "hbm_bandwidth": "HBM bandwidth", "scale_up_bandwidth": "scale-up bandwidth",
    "scale_out_bandwidth": "scale-out bandwidth", "latency": "latency", "host_overhead": "host overhead",
    "input_pipeline": "input pipeline",
}
SHOWN_CAUSES = 5


def speed_text(x: float) -> str:
    if x < 1.0:
        return f"at {x:.2g}x its modelled speed ({1.0 / x:.2g}x slower)"
    return f"{x:.2g}x faster than modelled"


def patterns_text(patterns) -> str:
    return "pattern" + ("s " if len(patterns) > 1 else " ") + ", ".join(str(p) for p in patterns)


def _gap_trend(d: Diagnosis) -> str:
    runs = sorted(d.runs, key=lambda r: r.num_gpus)
    first, last = runs[0], runs[-1]
    change = last.gap_frac - first.gap_frac
    word = "grows" if change > PART_THRESHOLD else "shrinks" if change < -PART_THRESHOLD else "stays level"
    compute = [r.predicted_breakdown_s["compute"] for r in (first, last)]
    per_gpu = "shrinks" if compute[1] < (1 - PART_THRESHOLD) * compute[0] else "stays level"
    return (f"the gap {word} with GPU count ({first.gap_frac:+.0%} at {first.num_gpus}, {last.gap_frac:+.0%} at "
            f"{last.num_gpus} GPUs) while predicted compute per GPU {per_gpu}")


def evidence_text(cause, d: Diagnosis) -> str:
    """What in the measurements points at ``cause``."""
    term = "compute" if cause.term == "memory_bandwidth" else cause.term
    for r in d.runs:
        for names, terms, measured, predicted in r.timers:
            if term in terms and len(terms) <= 2:
                return (f"the {names} timer measures {fmt.seconds(measured)} per step against "
                        f"{fmt.seconds(predicted)} predicted")
    if d.scaling:
        return _gap_trend(d)
    util = next((r for r in d.runs if r.measured_gpu_utilisation is not None), None)
    if util is not None and cause.term in ("data_wait", "overheads", "pipeline_bubble"):
        return (f"GPU utilisation is {fmt.percent(util.measured_gpu_utilisation)} against "
                f"{fmt.percent(util.predicted_gpu_utilisation)} predicted")
    gap = max(d.runs, key=lambda r: abs(r.gap_frac)).gap_frac
    return f"the measured step is {abs(gap):.0%} {'slower' if gap > 0 else 'faster'} than predicted"


def cause_sentence(cause, d: Diagnosis) -> str:
    """'<evidence>: <term> (<lens>; pattern n); measure <next>; <action>'."""
    advice = TERMS[cause.term]
    return (f"{evidence_text(cause, d)}: {advice.label} ({cause.lens}; {patterns_text(advice.patterns)}); "
            f"measure {advice.measure_next}; {advice.action}")


def cause_detail(cause) -> str:
    return (f"{LEVER_WORDS[cause.lever]} {speed_text(cause.speed_factor)} explains "
            f"{fmt.percent(max(cause.explained_frac, 0.0))} of the step-time gap "
            f"({cause.term}: {cause.term_change_s:+.3g} s per step)")


def _figure(key: str, value) -> str:
    if key == "run":
        return f"run {value}"
    if key == "first_over_steady":
        return f"first iteration {value:.2g}x the steady step"
    name = key.replace("_", " ")
    return f"{name} {fmt.percent(value)}" if isinstance(value, float) else f"{name} {value}"


def symptom_sentence(det) -> str:
    s = SYMPTOM[det.key]
    shown = ", ".join(_figure(k, v) for k, v in det.figures.items() if v is not None)
    return (f"{s.observed} ({shown}): {s.constraint} ({s.lens}; {patterns_text(s.patterns)}); "
            f"measure {s.measure_next}; {s.action}")


def _pair(measured, predicted, shown) -> str:
    return f"{shown(measured) if measured is not None else '-'} / {shown(predicted)}"


def run_rows(d: Diagnosis) -> list[list[str]]:
    rows = []
    for r in d.runs:
        band = "-" if r.band is None else (f"{fmt.seconds(r.band['p10'])}-{fmt.seconds(r.band['p90'])} "
                                           f"({'inside' if r.within_band else 'outside'})")
        rows.append([r.id, str(r.num_gpus), fmt.seconds(r.measured_step_time_s), fmt.seconds(r.predicted_step_time_s),
                     f"{r.gap_frac:+.1%}", band, _pair(r.measured_mfu, r.predicted_mfu, fmt.percent),
                     _pair(r.measured_gpu_utilisation, r.predicted_gpu_utilisation, fmt.percent),
                     _pair(r.measured_memory_bytes, r.predicted_memory_bytes, fmt.bytes_binary)])
    return rows


def sensitivity_text(s: Sensitivity) -> str:
    rows = [[RESOURCE_WORDS[e.resource], fmt.seconds(e.step_time_s), fmt.percent(e.gain_frac), f"{e.elasticity:.3f}",
             RESOURCE_LENS[e.resource]] for e in s.effects]
    lines = [fmt.table(rows, header=["resource", f"step at {s.speedup:g}x", "buys", "elasticity", "lens"])]
    if s.bottleneck:
        lines.append(f"bottleneck: {RESOURCE_WORDS[s.bottleneck]} ({RESOURCE_LENS[s.bottleneck]})")
    else:
        lines.append("bottleneck: none of these resources moves the step")
    if len(s.path) > 1:
        steps = [f"{RESOURCE_WORDS.get(p.bottleneck, 'nothing')} at {fmt.seconds(p.step_time_s)}" for p in s.path]
        lines.append(f"as the binding resource doubles, step by step ({patterns_text([1])}, {PATTERNS[1]}): "
                     + " -> ".join(steps))
    return "\n".join(lines)


def diagnosis_text(d: Diagnosis) -> str:
    out = ["Predicted against measured",
           fmt.table(run_rows(d), header=["run", "GPUs", "measured step", "predicted", "gap", "band",
                                          "MFU meas / pred", "GPU util meas / pred", "memory meas / pred"]), ""]
    out.append(f"Likely causes (weight: relative likelihood; 'the model's usual error' "
               f"{fmt.percent(d.no_cause_weight)})")
    if not d.causes:
        out.append("    none: no lever of the model explains the runs better than its usual error")
    for i, c in enumerate(d.causes[:SHOWN_CAUSES], 1):
        out.append(f"{i:2d}. {fmt.percent(c.weight):>6}  {cause_sentence(c, d)}")
        out.append(f"            {cause_detail(c)}")
    if d.separation_note:
        out.append(f"Note: {d.separation_note}")
    if d.scaling:
        out += ["", f"Scaling: tokens/s per GPU against {d.scaling[0].num_gpus} GPUs",
                fmt.table([[str(p.num_gpus), fmt.percent(p.measured_efficiency), fmt.percent(p.predicted_efficiency),
                            "parted" if p.parted else ""] for p in d.scaling],
                          header=["GPUs", "measured", "predicted", ""])]
        parts = d.parts_at_num_gpus
        out.append(f"measured and predicted part at {parts} GPUs" if parts else
                   f"measured and predicted efficiency agree within {fmt.percent(PART_THRESHOLD)}")
    if d.symptoms:
        out += ["", "Symptoms (LENSES.md, 'from symptom to next step')"]
        out += [f" - {symptom_sentence(s)}" for s in d.symptoms]
    out += ["", f"Sensitivity of {d.sensitivity_run}: what {d.sensitivity.speedup:g}x of each resource buys",
            sensitivity_text(d.sensitivity)]
    return "\n".join(out)


def anchored_text(ap) -> str:
    p, u, a = ap.prediction, ap.unanchored, ap.anchor
    band = ap.band["tokens_per_s_per_gpu"]
    rows = [["step time", fmt.seconds(p.step_time_s), fmt.seconds(u.step_time_s)],
            ["tokens/s per GPU", fmt.si(p.tokens_per_s_per_gpu, "tok/s"), fmt.si(u.tokens_per_s_per_gpu, "tok/s")],
            ["MFU", fmt.percent(p.mfu), fmt.percent(u.mfu)],
            ["tokens/s per GPU, p10-p90", f"{fmt.si(band['p10'], 'tok/s')} - {fmt.si(band['p90'], 'tok/s')}", ""]]
    lines = [fmt.table(rows, header=["", "anchored", "unanchored"]), "",
             "Anchor: " + ", ".join(f"{k} x{v:.3g}" for k, v in a.factors.items())
             + f" (fitted: {', '.join(a.fitted)}; {a.note})"]
    lines += [f"  {r.id}: measured {fmt.seconds(r.measured_step_time_s)}, predicted "
              f"{fmt.seconds(r.predicted_step_time_s)}, anchored {fmt.seconds(r.anchored_step_time_s)}" for r in a.runs]
    lines.append(f"Band: {ap.band_source}")
    lines += [f"Note: {n}" for n in ap.notes]
    return "\n".join(lines)
