"""A serving prediction and the serving validation in words: tables for ``perfmodel serve`` and
``perfmodel validate-serving``, and the markdown section of docs/serving_validation.md."""

from __future__ import annotations

from perfmodel.present import fmt


def serve_rows(d: dict) -> list[list[str]]:
    """Rows of ``perfmodel serve``'s table from ``ServePrediction.to_dict()``."""
    p = d["point"]
    return [
        ["deployment", (f"{d['model']} on {d['num_gpus']} x {d['hardware']} ({d['replicas']} replica(s) of "
                       f"{d['gpus_per_replica']} GPU(s))")],
        ["weights / KV cache per GPU", (f"{fmt.bytes_binary(d['weight_bytes_per_gpu'])} / "
                                       f"{fmt.bytes_binary(d['kv_cache_bytes_per_gpu'])}")],
        ["concurrency per replica (most the cache holds)", f"{p['concurrency']:,} ({d['max_concurrency']:,})"],
        ["time to first token (TTFT)", fmt.seconds(d["ttft_s"])],
        ["time per output token (TPOT), worst step", f"{fmt.seconds(d['tpot_s'])}, {fmt.seconds(p['tpot_worst_step_s'])}"],
        ["TTFT p50 / p99 (Poisson arrivals queueing for the prefill)",
         f"{fmt.seconds(d['ttft_p50_s'])} / {fmt.seconds(d['ttft_p99_s'])}"],
        ["TPOT p50 / p99 (steps that carry a prefill)",
         f"{fmt.seconds(d['tpot_p50_s'])} / {fmt.seconds(d['tpot_p99_s'])}"],
        ["output tokens/s per GPU / per replica", (f"{d['output_tokens_per_s_per_gpu']:,.0f} / "
                                                  f"{d['output_tokens_per_s_per_replica']:,.0f}")],
        ["requests/s (deployment)", f"{d['requests_per_s']:,.3g}" + (" (saturated)" if d["saturated"] else "")],
        ["meets the objectives", "yes" if p["meets_objectives"] else "NO"],
        ["goodput at this concurrency: output tokens/s per GPU", f"{d['goodput_output_tokens_per_s_per_gpu']:,.0f}"],
        ["most within the objectives (SLO goodput): tokens/s per GPU (requests/s)",
         f"{d['slo_goodput_output_tokens_per_s_per_gpu']:,.0f} ({d['slo_goodput_requests_per_s']:,.3g})"],
        ["price", fmt.usd_per_gpu_hour(d["usd_per_gpu_hour"])],
        ["$ per million input / output tokens", (f"${d['usd_per_million_input_tokens']:.3g} / "
                                                f"${d['usd_per_million_output_tokens']:.3g}")],
    ]


def curve_rows(d: dict) -> list[list[str]]:
    return [[f"{c['concurrency']:,}", fmt.seconds(c["ttft_s"]), fmt.seconds(c["tpot_s"]),
             f"{c['output_tokens_per_s_per_gpu']:,.0f}", "yes" if c["meets_objectives"] else "no"]
            for c in d["curve"]]


CURVE_HEADER = ["concurrency", "TTFT", "TPOT", "output tok/s per GPU", "meets objectives"]


def validation_markdown(d: dict, command: str) -> str:
    """The markdown section of a serving validation (``ServingValidation.to_dict()``)."""
    lines = ["## Serving validation", "",
             (f"`{command}`: predicted against published output tokens/s per GPU, "
             f"{d['num_cases']} results; MAPE {fmt.percent(d['mape'])} (target 15%)."), "",
             "| GPU | results | MAPE |", "|---|---:|---:|"]
    lines += [f"| {g} | {v['cases']} | {fmt.percent(v['mape'])} |" for g, v in d["mape_by_gpu"].items()]
    lines += ["", "| run | layout | concurrency | predicted | measured | error |", "|---|---|---:|---:|---:|---:|"]
    lines += [f"| {c['id']} | {c['layout']} | {c['concurrency']:,} | {c['predicted_output_tokens_per_s_per_gpu']:,.0f} | "
              f"{c['measured_output_tokens_per_s_per_gpu']:,.0f} | {c['error']:+.1%} |" for c in d["cases"]]
    lines += latency_markdown(d, command)
    lines += ["", f"Not compared ({len(d['skipped'])} rows):", ""]
    lines += [f"- {s['id']}: {s['reason']}" for s in d["skipped"]]
    return "\n".join(lines)


def latency_line(d: dict) -> str:
    """'TTFT MAPE x% (n results), TPOT MAPE y% (m)' of a serving validation, or '' without latency rows."""
    lm = d.get("latency_mape", {})
    parts = [f"{m.upper()} MAPE {fmt.percent(lm[m]['mape'])} ({lm[m]['cases']} results)" for m in ("ttft", "tpot") if m in lm]
    return ", ".join(parts)


def latency_markdown(d: dict, command: str) -> list[str]:
    """The latency part of the serving validation section: MAPE per metric and GPU, and each result."""
    if not d.get("latency_cases"):
        return []
    lines = ["", "### Latency", "",
             (f"`{command}`: predicted against published time to first token and time per output token at the "
              f"published load, a request rate or a number of concurrent requests (the statistic the source "
              f"publishes: mean, else p50): {latency_line(d)}."), "",
             "| metric | GPU | results | MAPE |", "|---|---|---:|---:|"]
    for key, v in d["latency_mape"].items():
        metric, _, gpu = key.partition(" ")
        lines.append(f"| {metric.upper()} | {gpu or '**all**'} | {v['cases']} | {fmt.percent(v['mape'])} |")
    lines += ["", "| run | layout | requests/s (served) | metric | predicted | measured | error |", "|---|---|---:|---|---:|---:|---:|"]
    lines += [f"| {c['id']} | {c['layout']} | {c['requests_per_s']:.3g} | {c['metric'].upper()} {c['statistic']} | "
              f"{fmt.seconds(c['predicted_s'])} | {fmt.seconds(c['measured_s'])} | {c['error']:+.1%} |"
              for c in d["latency_cases"]]
    return lines


def summary_markdown(d: dict, command: str) -> str:
    """The short serving section of ``docs/validation.md``: the MAPE over all results and per GPU of
    one serving validation (``ServingValidation.to_dict()``); the per-run table is
    ``validation_markdown``'s (docs/serving_validation.md)."""
    lines = ["## Serving", "",
             (f"The serving engine (docs/serving.md) against published output tokens/s per GPU (`{command}`, "
              f"perfmodel/data/serving_runs.yaml): {d['num_cases']} results, MAPE **{fmt.percent(d['mape'])}** "
              f"(target 15%); {len(d['skipped'])} rows not compared. Each run: docs/serving_validation.md."), "",
             "| GPU | results | MAPE |", "|---|---:|---:|"]
    lines += [f"| {g} | {v['cases']} | {fmt.percent(v['mape'])} |" for g, v in d["mape_by_gpu"].items()]
    lines.append(f"| **all** | {d['num_cases']} | **{fmt.percent(d['mape'])}** |")
    if latency_line(d):
        lines += ["", f"Latency at the published load (docs/serving_validation.md): {latency_line(d)}."]
    return "\n".join(lines)
