"""calibration/clocks.py: the clock of each phase from an nvidia-smi log, and the in-step clock
ratio of the H100 and H200 specs recomputed from the committed logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from calibration.cli import main
from calibration.clocks import clock_ratio, committed_ratio, phase, read_marks, read_samples
from perfmodel.spec.hardware import load_hardware

RESULTS = Path(__file__).resolve().parents[2] / "calibration" / "results"
H100 = RESULTS / "nvidia-h100-80gb-hbm3-2026-11-27"
H200 = RESULTS / "nvidia-h200-2026-11-27"

LOG = """timestamp, clocks.current.sm [MHz], clocks.current.memory [MHz], power.draw [W], temperature.gpu, clocks_event_reasons.active
2026/11/27 10:00:00.000, 345 MHz, 2619 MHz, 70.00 W, 30, 0x0000000000000001
2026/11/27 10:00:01.000, 1980 MHz, 2619 MHz, 300.00 W, 40, 0x0000000000000000
2026/11/27 10:00:02.000, 1900 MHz, 2619 MHz, 500.00 W, 41, 0x0000000000000000
2026/11/27 10:00:03.000, 1500 MHz, 2619 MHz, 699.00 W, 50, 0x0000000000000004
2026/11/27 10:00:04.000, 1700 MHz, 2619 MHz, 690.00 W, 52, 0x0000000000000004
2026/11/27 10:00:05.000, 1600 MHz, 2619 MHz, 120.00 W, 45, 0x0000000000000000
2026/11/27 10:00:06.0
"""
MARKS = """attention_start 2026/11/27 10:00:00.500000000
attention_end 2026/11/27 10:00:02.500000000
step_start 2026/11/27 10:00:02.500000000
step_end 2026/11/27 10:00:05.500000000
"""


@pytest.fixture()
def log(tmp_path):
    (tmp_path / "clocks.csv").write_text(LOG)
    (tmp_path / "marks.txt").write_text(MARKS)
    return tmp_path / "clocks.csv", tmp_path / "marks.txt"


def test_phases_by_hand(log):
    """Attention: the 1980 and 1900 MHz samples (median 1940); the step: 1500 and 1700 MHz above
    400 W (mean 1600; the 120 W sample is idle); ratio 1600 / 1940. The cut-off last line is skipped."""
    samples, marks = read_samples(log[0]), read_marks(log[1])
    assert len(samples) == 6
    attention = phase(samples, marks, "attention_start", "attention_end")
    step = phase(samples, marks, "step_start", "step_end", busy_w=400)
    assert (attention.busy, attention.median_mhz, attention.capped) == (2, 1940, 0)
    assert (step.busy, step.mean_mhz, step.capped) == (2, 1600, 2)
    assert clock_ratio(step, attention) == pytest.approx(1600 / 1940)


@pytest.mark.parametrize("hw_id,folder,step_log,step_marks,window,att_log,att_marks", [
    ("h100-sxm", H100, "clocks_probe_and_step.csv", "clocks_probe_and_step_marks.txt", ("probe_end", "step_end"),
     "clocks_gemm_and_attention.csv", "clocks_gemm_and_attention_marks.txt"),
    ("h200-sxm", H200, "clocks_gemm_attention_step.csv", "clocks_gemm_attention_step_marks.txt",
     ("step_start", "step_end"), "clocks_gemm_attention_step.csv", "clocks_gemm_attention_step_marks.txt"),
])
def test_the_specs_ratio_is_the_committed_logs(hw_id, folder, step_log, step_marks, window, att_log, att_marks):
    step, attention, ratio = committed_ratio(folder / step_log, folder / step_marks, window,
                                             folder / att_log, folder / att_marks)
    assert step.capped >= 0.9 * step.busy          # a step runs at the power cap
    assert attention.median_mhz > step.mean_mhz
    assert load_hardware(hw_id).efficiency.attention_clock_ratio == pytest.approx(ratio, abs=5e-4)


def test_the_gemm_group_ran_at_the_power_cap():
    samples, marks = (read_samples(H100 / "clocks_gemm_and_attention.csv"),
                      read_marks(H100 / "clocks_gemm_and_attention_marks.txt"))
    gemm = phase(samples, marks, "gemm_start", "gemm_end")
    assert gemm.capped > 0.9 * gemm.busy and gemm.median_mhz < 1500


def test_cli_prints_each_phase(log, capsys):
    assert main(["clocks", str(log[0]), str(log[1])]) == 0
    out = capsys.readouterr().out
    assert "attention_start..attention_end" in out and "step_start..step_end" in out


@pytest.mark.parametrize("swap,fragment", [(True, "is not 'NAME"), (False, "no column")])
def test_files_of_the_wrong_kind_are_one_line_errors(log, capsys, swap, fragment):
    argv = [str(log[0]), str(log[0])] if swap else [str(log[1]), str(log[1])]
    assert main(["clocks", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and fragment in err and "Traceback" not in err


def test_a_missing_mark_is_named(log):
    from perfmodel.spec.errors import InputError
    samples, marks = read_samples(log[0]), read_marks(log[1])
    with pytest.raises(InputError) as err:
        phase(samples, marks, "gemm_start", "gemm_end")
    assert "gemm_start" in str(err.value)
