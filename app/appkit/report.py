"""A downloadable report of the Plan page's job: the figures with their bands and price source,
every Plan chart as an SVG drawn here (vl-convert, the Vega project's renderer: the file needs
no script and no network when it is opened) and the scenario YAML.

Built only when the user clicks the download (Streamlit's deferred ``data``), from the same
cached views and chart specs the page draws."""

from __future__ import annotations

import html
import json

import streamlit as st

from perfmodel.present import fmt

from perfmodel.spec.errors import InputError

from . import cached, cached_serving, specs, state
from .state import JobInputs

REPORT_CHART_WIDTH_PX = 900
"""Width of a chart the page draws at the container's width (the report's body is 1000 px)."""
CHART_TITLES = {"breakdown": "Where the step time goes", "memory": "Memory per GPU against usable HBM",
                "waterfall": "Goodput: from the cluster's peak to useful work",
                "stages": "Memory per GPU of each pipeline stage", "roofline": "Roofline",
                "timeline": "Pipeline schedule"}


def _row(label: str, value: str, band: str = "") -> str:
    return f"<tr><th>{html.escape(label)}</th><td>{html.escape(value)}</td><td>{html.escape(band)}</td></tr>"


def serving_rows(serving_json: str | None, use_profile: bool) -> str:
    """The Serve page's answer (``cached_serving.serve_view``) as a section, or "" where none was asked."""
    if serving_json is None:
        return ""
    try:
        d = cached_serving.serve_view(serving_json, use_profile)
    except InputError as exc:
        return f"<h2>Serving</h2><p>{html.escape(str(exc))}</p>"
    s = json.loads(serving_json)["serving"]
    rows = [_row("workload", f"{s['prompt_tokens']:,} prompt and {s['output_tokens']:,} output tokens, "
                             f"{s['concurrency']:,} in flight per replica, {s['batching']} batching, "
                             f"tp{s['parallelism']['tp']}, objectives on the {s['objectives_at']}"),
            _row("time to first token", fmt.seconds(d["ttft_s"]), f"objective {fmt.seconds(s['ttft_s'])}"),
            _row("time per output token", fmt.seconds(d["tpot_s"]), f"objective {fmt.seconds(s['tpot_s'])}"),
            _row("TTFT p50 / p99", f"{fmt.seconds(d['ttft_p50_s'])} / {fmt.seconds(d['ttft_p99_s'])}"),
            _row("TPOT p50 / p99", f"{fmt.seconds(d['tpot_p50_s'])} / {fmt.seconds(d['tpot_p99_s'])}"),
            _row("output tokens/s per GPU", f"{d['output_tokens_per_s_per_gpu']:,.0f}"),
            _row("SLO goodput, tokens/s per GPU", f"{d['slo_goodput_output_tokens_per_s_per_gpu']:,.0f}"),
            _row("per million output tokens", f"${d['usd_per_million_output_tokens']:.3g}"),
            _row("meets the objectives", "yes" if d["point"]["meets_objectives"] else "no")]
    return f"<h2>Serving</h2><table>{''.join(rows)}</table>"


def report_html(key: str, scenario_yaml: str, serving_json: str | None = None) -> str:
    """The report as one HTML page (text escaped; the charts' specs as JSON), with the Serve page's
    answer where ``serving_json`` (its serving scenario) is given."""
    v = cached.plan_view(key)
    p, price = v["prediction"], v["price"]
    b = p.get("band") or {}
    tokens = json.loads(key)["scenario"].get("training_tokens")
    rows = [
        _row("goodput", fmt.percent(p["goodput_frac"]), f"{fmt.percent(p['training_time_frac'])} of wall time trains"),
        _row("time to train", fmt.seconds(p.get("time_to_train_s")), fmt.band(b.get("time_to_train_s"), fmt.seconds)),
        _row("cost", fmt.usd(p.get("cost_usd")), fmt.band(b.get("cost_usd"), fmt.usd)),
        _row("per million tokens", fmt.usd_per_million_tokens(p.get("cost_usd"), tokens)),
        _row("price", fmt.usd_per_gpu_hour(price["usd_per_gpu_hour"]), price["text"]),
        _row("tokens/s per GPU", fmt.si(p["tokens_per_s_per_gpu"], "tok/s"),
             fmt.band(b.get("tokens_per_s_per_gpu"), lambda x: fmt.si(x, "tok/s"))),
        _row("step time", fmt.seconds(p["step_time_s"]), fmt.band(b.get("step_time_s"), fmt.seconds)),
        _row("MFU", fmt.percent(p["mfu"])),
        _row("memory per GPU", fmt.bytes_binary(p["memory_per_gpu_bytes"]),
             "fits" if p["fits_in_memory"] else "DOES NOT FIT"),
        _row("bottleneck", f"{p['bottleneck']} ({p['bottleneck_lens']})"),
    ]
    breakdown = "".join(_row(k, fmt.seconds(s), fmt.percent(s / p["step_time_s"]))
                        for k, s in p["breakdown_s"].items() if s > 0)
    import vl_convert  # the app's dependency; imported here, when a report is asked for

    charts = []
    for name in specs.PLAN_CHARTS:
        spec = specs.plan_spec(key, name)
        if spec is None:
            continue
        body = ({**spec["spec"], "width": REPORT_CHART_WIDTH_PX} if spec["spec"].get("width") == "container"
                else spec["spec"])
        svg = vl_convert.vegalite_to_svg(vl_spec=body)   # text in it is XML-escaped by the renderer
        charts.append(f"<h3>{html.escape(CHART_TITLES[name])}</h3><figure class='chart'>{svg}</figure>")
    title = f"{v['model_name']} on {json.loads(key)['scenario']['num_gpus']} x {v['hardware_id']}"
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>perfmodel: {html.escape(title)}</title>"
            f"<style>body{{font-family:sans-serif;max-width:1000px;margin:2em auto}}"
            f"th{{text-align:left;padding-right:1em}}td{{padding-right:1em}}</style></head><body>"
            f"<h1>perfmodel: {html.escape(title)}</h1><p>{html.escape(v['hardware_name'])}. Efficiencies: "
            f"{html.escape(v['efficiency_note'])}. Ranges are the 80% error band (docs/validation.md).</p>"
            f"<h2>Figures</h2><table>{''.join(rows)}</table><h2>Step time by component</h2><table>{breakdown}</table>"
            f"<h2>Charts</h2><p>Drawn when the report was made; the tables above carry every number.</p>"
            f"{''.join(charts)}{serving_rows(serving_json, json.loads(key)['use_profile'])}<h2>Scenario</h2><pre>{html.escape(scenario_yaml)}</pre></body></html>")


def download_button(j: JobInputs, key: str) -> None:
    """The report's download, built when clicked."""
    yaml_text = state.scenario_yaml(j.scenario)
    asked = st.session_state.get("_serve_shown") or any(
        getattr(j.scenario.studies, f"serve_{k}") is not None for k in cached_serving.SERVE_DEFAULTS)
    serving = (json.dumps(cached_serving.serving_scenario(j, cached_serving.serve_options(j.scenario.studies)),
                          sort_keys=True) if asked else None)
    st.download_button("Download a report (HTML: figures, price source, charts, scenario YAML)",
                       data=lambda: report_html(key, yaml_text, serving), file_name=state.download_name(j.scenario.name)
                       .replace(".yaml", "-report.html"), mime="text/html", key="plan_report", on_click="ignore")
