"""Draw a Trace Event Format file (``perfmodel trace`` output) as a PNG, offline: an SVG of one lane
per process and thread, events coloured by ``cat``, screenshotted by headless Chromium through
Playwright (the test extras). Perfetto (ui.perfetto.dev) cannot be reached from a machine without
network; this draws the same events the way its timeline lays them out.

    python scripts/render_trace.py step.json docs/trace_example.png [--chromium /usr/bin/chromium]
"""

from __future__ import annotations

import argparse
import html
import json
import sys
import tempfile
from pathlib import Path

COLOURS = {"gemm": "#4c78a8", "attention": "#f58518", "elementwise": "#54a24b", "communication": "#e45756",
           "idle": "#d8d8d8"}
WIDTH, LANE, LABEL = 1400, 26, 190


def svg(doc: dict) -> str:
    events = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "thread_name"}
    procs = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "process_name"}
    lanes = sorted({(e["pid"], e["tid"]) for e in events})
    end = max(e["ts"] + e["dur"] for e in events) or 1.0
    scale = (WIDTH - LABEL - 20) / end
    height = LANE * (len(lanes) + 3)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="sans-serif" '
           'font-size="12">', f'<rect width="{WIDTH}" height="{height}" fill="white"/>']
    for i, lane in enumerate(lanes):
        y = LANE * (i + 1)
        label = f"{procs.get(lane[0], lane[0])} / {names.get(lane, lane[1])}"
        out.append(f'<text x="6" y="{y + 17}">{html.escape(label)}</text>')
        for e in events:
            if (e["pid"], e["tid"]) == lane:
                x, w = LABEL + e["ts"] * scale, max(e["dur"] * scale, 0.3)
                out.append(f'<rect x="{x:.2f}" y="{y + 3}" width="{w:.2f}" height="{LANE - 6}" '
                           f'fill="{COLOURS.get(e["cat"], "#999")}"><title>{html.escape(e["name"])}</title></rect>')
    y = LANE * (len(lanes) + 1) + 18
    for k in range(0, 11):
        t_s = end * k / 10 / 1e6
        out.append(f'<text x="{LABEL + end * k / 10 * scale:.1f}" y="{y}" text-anchor="middle">{t_s:.2f} s</text>')
    x = LABEL
    for cat, colour in COLOURS.items():
        out.append(f'<rect x="{x}" y="{y + 12}" width="14" height="14" fill="{colour}"/>'
                   f'<text x="{x + 18}" y="{y + 24}">{cat}</text>')
        x += 130
    out.append("</svg>")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("png")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    args = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright
    page_svg = svg(json.loads(Path(args.trace).read_text()))
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "trace.html"
        page.write_text(f"<html><body style='margin:0'>{page_svg}</body></html>")
        with sync_playwright() as p:
            b = p.chromium.launch(executable_path=args.chromium, args=[
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update"])
            pg = b.new_page(viewport={"width": WIDTH, "height": 400})
            pg.goto(page.as_uri())
            pg.locator("svg").screenshot(path=args.png)
            b.close()
    print(f"wrote {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
