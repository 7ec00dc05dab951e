"""How long the Plan page takes to redraw after a widget change (Streamlit AppTest, no browser).

    python app/measure_redraw.py

Prints the median and worst time of a rerun with new inputs (cache miss: the model runs)
and with unchanged inputs (cache hit), and of the cached model call alone.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from appkit import cached, state  # noqa: E402
from perfmodel.spec.cost import CostModel  # noqa: E402

CHANGES = [(8, 64), (2, 64), (4, 128), (8, 128), (2, 32), (4, 256), (8, 256), (4, 64)]
"""(tp, num_gpus) pairs set one after another."""


def main() -> None:
    at = AppTest.from_file(str(HERE / "streamlit_app.py"), default_timeout=60).run()
    cold, warm = [], []
    for tp, n in CHANGES:
        at.number_input(key="tp").set_value(tp)
        at.number_input(key="num_gpus").set_value(n)
        t = time.perf_counter()
        at.run()
        cold.append(time.perf_counter() - t)
        assert not at.exception and not at.error, (tp, n, [e.value for e in at.error])
        t = time.perf_counter()
        at.run()
        warm.append(time.perf_counter() - t)
    sc = state.default_scenario()
    alone = []
    for tp in (1, 2, 4, 8):
        par = sc.parallelism.model_copy(update={"tp": tp})
        key = state.JobInputs(sc.model_copy(update={"parallelism": par, "name": f"redraw-{tp}"}), None,
                              CostModel(), True).key()
        t = time.perf_counter()
        cached.plan_view(key)
        alone.append(time.perf_counter() - t)
    ms = 1e3
    print(f"Plan page rerun, new inputs (cache miss): median {ms * statistics.median(cold):.0f} ms, "
          f"worst {ms * max(cold):.0f} ms")
    print(f"Plan page rerun, same inputs (cache hit): median {ms * statistics.median(warm):.0f} ms, "
          f"worst {ms * max(warm):.0f} ms")
    print(f"plan_view model call alone (cache miss):  median {ms * statistics.median(alone):.0f} ms")


if __name__ == "__main__":
    main()
