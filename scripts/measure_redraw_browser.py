"""How long each page of the app takes, in Chromium, from a widget change to the redrawn page.

    .venv/bin/python scripts/measure_redraw_browser.py [--repeats 8] [--pages plan,compare]

Starts ``streamlit run app/streamlit_app.py`` on a free local port and drives Debian's chromium
with Playwright. On each page it changes the sidebar's tp (4 and 8 in turn) ``--repeats`` times;
an interaction that does not start a search. The time is from the key press to the server's
``script_finished`` message (read from the page's WebSocket) plus two animation frames of the
browser, so the deltas are painted: what the user waits for. Prints the median and the 90th
percentile per page, in milliseconds.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "app" / "streamlit_app.py"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update"]
PAGES = ("plan", "compare", "scale", "search", "size", "peers", "diagnose", "calibration")
VIEWPORT = {"width": 1440, "height": 1000}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int, log_path: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "streamlit", "run", str(APP), "--server.port", str(port), "--server.address",
           "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false",
           "--server.fileWatcherType", "none"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=open(log_path, "w"), stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://localhost:{port}/_stcore/health", timeout=2) as r:
                if r.read().strip() == b"ok":
                    return proc
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise SystemExit("streamlit did not start")


class RunWatcher:
    """Counts the ``script_finished`` messages the server sends over the page's WebSocket."""

    def __init__(self, page):
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
        self.finished = 0
        self._msg = ForwardMsg

        def on_ws(ws):
            ws.on("framereceived", self._frame)
        page.on("websocket", on_ws)

    def _frame(self, payload) -> None:
        if isinstance(payload, str):
            return
        try:
            m = self._msg.FromString(payload)
        except Exception:  # noqa: BLE001 - not a ForwardMsg
            return
        if m.WhichOneof("type") == "script_finished":
            self.finished += 1


def wait_idle(page, watcher: RunWatcher, before: int, timeout_s: float = 120.0) -> None:
    """Until a run has finished since ``before`` and the browser has painted twice."""
    t_end = time.monotonic() + timeout_s
    while watcher.finished <= before:
        page.wait_for_timeout(5)
        if time.monotonic() > t_end:
            raise TimeoutError("no script_finished")
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


def measure_page(page, watcher: RunWatcher, base: str, name: str, repeats: int) -> list[float]:
    before = watcher.finished
    page.goto(f"{base}/{'' if name == 'plan' else name}")
    page.get_by_role("heading").first.wait_for(timeout=180_000)
    wait_idle(page, watcher, before, 300)
    page.wait_for_timeout(1500)       # any second run (the URL written back) settles
    box = page.get_by_label("tp", exact=True)
    times = []
    for i in range(repeats):
        value = "8" if i % 2 == 0 else "4"
        box.fill(value)
        before = watcher.finished
        t0 = time.perf_counter()
        box.press("Enter")
        wait_idle(page, watcher, before)
        times.append(time.perf_counter() - t0)
        page.wait_for_timeout(300)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=8)
    ap.add_argument("--pages", default=",".join(PAGES))
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    port = free_port()
    log = ROOT / "artifacts" / "measure_redraw_browser.log"
    log.parent.mkdir(exist_ok=True)
    proc = start_server(port, log)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport=VIEWPORT)
            watcher = RunWatcher(page)
            print(f"{'page':<12} {'median':>8} {'p90':>8}  (ms, {args.repeats} changes of tp each)")
            for name in args.pages.split(","):
                t = sorted(measure_page(page, watcher, f"http://localhost:{port}", name, args.repeats))
                p90 = t[min(len(t) - 1, round(0.9 * (len(t) - 1)))]
                print(f"{name:<12} {1e3 * statistics.median(t):>8.0f} {1e3 * p90:>8.0f}", flush=True)
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=15)


if __name__ == "__main__":
    main()
