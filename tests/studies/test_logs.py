"""Log readers: each parses its sample log (tests/data/logs, written in the shape each tool
prints); a malformed or unknown log is a one-line error naming what was expected."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfmodel.spec import limits
from perfmodel.spec.errors import InputError
from perfmodel.spec.observed.logs import parse_log, read_log
from perfmodel.spec.observed.measured import MeasuredRun, measured_from_mapping
from perfmodel.spec.observed.runs import load_runs, runs_from_data, runs_to_cases
from perfmodel.spec.units import GIBI, MEBI

LOGS = Path(__file__).resolve().parents[1] / "data" / "logs"
EXAMPLE = Path(__file__).resolve().parents[2] / "perfmodel" / "data" / "example_scenario.yaml"


def test_megatron_steady_step_timers_and_memory():
    """Iteration times 52310.8, 15212.6, 15203.1, 15200.0, 15196.9 ms; the steady state is the
    median of the last half (items 3-5): 15.2000 s. The all-grads-sync timer's slowest rank per
    block: 63.02, 62.44, 62.90, 63.00, 63.40 ms -> median of the last three = 63.00 ms. Setup
    timers (before iteration 1) and save-checkpoint are not a step's. Memory: max allocated
    61234.56 MB of rank 0."""
    (m,) = read_log(LOGS / "megatron_sample.log")
    assert m.steady_step_s() == pytest.approx(15.2000)
    assert m.step_times_s[0] == pytest.approx(52.3108)
    assert m.global_batch_size == 128
    assert m.timers_s["all-grads-sync"] == pytest.approx(0.06300)
    assert m.timers_s["batch-generator"] == pytest.approx(0.01520)        # 15.81, 15.40, 15.00, 15.20 -> last half
    assert "model-and-optimizer-setup" not in m.timers_s and "save-checkpoint" not in m.timers_s
    assert m.peak_memory_bytes == pytest.approx(61234.56 * MEBI)
    assert m.tflop_per_s_per_gpu == pytest.approx(483.6)                 # 483.5, 483.6, 483.7 -> 483.6
    assert m.first_iteration_ratio() == pytest.approx(52.3108 / 15.2)


def test_nemo2_and_nemo1_progress_bar():
    """NeMo 2: 41.72, 6.105, 6.098, 6.101, 6.097, 6.099 s -> median(6.101, 6.097, 6.099) = 6.099.
    NeMo 1 redraws its progress bar with carriage returns: 41.20, 5.910, 5.900, 5.902 s ->
    median(5.900, 5.902) = 5.901."""
    (m2,) = read_log(LOGS / "nemo2_sample.log")
    assert m2.steady_step_s() == pytest.approx(6.099) and m2.global_batch_size == 128
    (m1,) = read_log(LOGS / "nemo1_sample.log")
    assert m1.steady_step_s() == pytest.approx(5.901)
    assert m1.step_times_s == pytest.approx((41.20, 5.910, 5.900, 5.902))


def test_torchtitan_with_colours():
    """tps 412, 6,512, 6,540, 6,528, 6,536 (per GPU) -> median of the last three = 6,536; mfu
    38.30, 38.23, 38.28 % -> 38.28%; memory: the largest reserved, 57.90 GiB; first logged step
    6536 / 412 = 15.9x slower than the steady state."""
    (m,) = read_log(LOGS / "torchtitan_sample.log")
    assert m.tokens_per_s_per_gpu == pytest.approx(6536)
    assert m.mfu == pytest.approx(0.3828)
    assert m.peak_memory_bytes == pytest.approx(57.90 * GIBI)
    assert m.first_iteration_ratio() == pytest.approx(6536 / 412)
    assert m.steady_step_s() is None


def test_hf_trainer_metrics():
    """train_tokens_per_second 7110.83 is per device; train_samples_per_second 27.777 the job's.
    A 256-sequence batch of 2,048 tokens on 8 GPUs: 256 * 2048 / (7110.83 * 8) = 9.2167 s."""
    (m,) = read_log(LOGS / "hf_trainer_sample.log")
    assert m.tokens_per_s_per_gpu == pytest.approx(7110.83) and m.samples_per_s == pytest.approx(27.777)
    step, basis = m.step_s_for(256, 2048, 8, 1.0, 1.0)
    assert step == pytest.approx(256 * 2048 / (7110.83 * 8)) and basis == "tokens/s per GPU"


def test_lightning_metrics_csv():
    """ThroughputMonitor columns under Lightning's 'train|' prefix; the first row has none.
    device/items_per_sec 8519.7, 8683.5, 8683.5 -> median of the last two = 8683.5."""
    (m,) = read_log(LOGS / "lightning_metrics.csv")
    assert m.tokens_per_s_per_gpu == pytest.approx(8683.5)
    assert m.mfu == pytest.approx(0.419) and m.samples_per_s == pytest.approx(16.96)


def test_csv_of_step_times_and_a_scaling_series():
    """step_times.csv: 31.2, 6.41, 6.40, 6.39, 6.40 -> 6.40 s, the first 31.2 / 6.40 = 4.875x.
    scaling_series.csv: one run per GPU count, with its batch and utilisation."""
    (m,) = read_log(LOGS / "step_times.csv")
    assert m.steady_step_s() == pytest.approx(6.40) and m.first_iteration_ratio() == pytest.approx(4.875)
    runs = read_log(LOGS / "scaling_series.csv")
    assert [(r.num_gpus, r.global_batch_size, r.step_time_s, r.gpu_utilisation) for r in runs] == [
        (64, 128, 6.40, 0.93), (128, 256, 6.55, 0.91), (256, 512, 6.86, 0.88)]


def test_yaml_measured_block():
    (m,) = read_log(LOGS / "measured.yaml")
    assert m.step_time_s == 6.4 and m.timers_s == {"dp_comm": 0.12, "optimizer": 0.5}
    assert m.peak_memory_bytes == pytest.approx(61.5 * GIBI)


@pytest.mark.parametrize("name,text,expected", [
    ("unknown.log", (LOGS / "unknown.log").read_text(), "not a training log perfmodel reads; expected Megatron-LM"),
    ("x.csv", "a,b\n1,2\n", "a CSV with none of the columns"),
    ("x.csv", "step_time_s,num_gpus\nfast,8\n", "line 2: step_time_s is not a number"),
    ("x.csv", "step_time_s,num_gpus\n1.5,8.5\n", "num_gpus must be a positive whole number"),
    ("x.yaml", "step_time_s: -1\n", "x.yaml.step_time_s: must be a finite number"),
    ("x.yaml", "gpu_utilisation: 0.5\n", "no measured speed"),
    ("x.yaml", "step_time_s: .inf\n", "must be a finite number"),
    ("x.log", "{'train_runtime': 10.0, 'train_samples_per_second': 0.0}\n", "no positive train_*_per_second"),
    ("x.log", "step: 1  loss: 3.0  tps: 0  mfu: 0.0%\n", "no positive 'tps:' value"),
])
def test_malformed_logs_are_one_line_errors(name, text, expected):
    with pytest.raises(InputError) as exc:
        parse_log(text, name)
    assert expected in str(exc.value) and "\n" not in str(exc.value)


def test_nccl_tests_output_points_to_calibrate():
    with pytest.raises(InputError, match="perfmodel calibrate"):
        read_log(LOGS.parent / "nccl" / "all_reduce_perf_sample.txt")


def test_reading_is_bounded(tmp_path):
    """A file past the log limit is refused before it is read whole; a binary file and a line
    longer than ``MAX_LOG_LINE_CHARS`` (skipped, not scanned) do no harm."""
    big = tmp_path / "big.log"
    big.write_bytes(b"x" * (limits.MAX_LOG_FILE_BYTES + 1))
    with pytest.raises(InputError, match="too large"):
        read_log(big)
    binary = tmp_path / "bin.log"
    binary.write_bytes(b"\x00\x01\x02")
    with pytest.raises(InputError, match="binary"):
        read_log(binary)
    long_line = "elapsed time per iteration (ms): 1.0 |" + "x" * limits.MAX_LOG_LINE_CHARS
    with pytest.raises(InputError, match="not a training log"):
        parse_log(long_line + "\n", "long.log")


def test_runs_file_forms_and_round_trip(tmp_path):
    """A scenario with logs, one case, and a cases file (what read-log writes) give the same runs."""
    runs = load_runs(EXAMPLE, [LOGS / "megatron_sample.log", LOGS / "scaling_series.csv"])
    assert [r.id for r in runs] == ["megatron_sample.log", "scaling_series.csv[1]", "scaling_series.csv[2]",
                                    "scaling_series.csv[3]"]
    assert [r.scenario.num_gpus for r in runs] == [64, 64, 128, 256]
    assert runs[3].scenario.global_batch_size == 512
    back = runs_from_data(runs_to_cases(runs), "cases")
    assert [(r.id, r.scenario, r.measured.steady_step_s()) for r in back] == [
        (r.id, r.scenario, r.measured.steady_step_s()) for r in runs]
    one = runs_from_data({"scenario": runs[0].scenario.model_dump(mode="json"), "measured": {"step_time_s": 5.0}},
                         "run.yaml")
    assert one[0].measured.step_time_s == 5.0


def test_a_published_case_reads_its_derived_block():
    case = {"id": "c", "scenario": {"hardware": "h100-sxm", "num_gpus": 8, "model": "llama3-8b", "seq_length": 8192,
                                    "global_batch_size": 64},
            "measured": {"hardware_tflops_per_gpu": 400}, "derived": {"step_time_s": 3.0}}
    (run,) = runs_from_data({"cases": [case]}, "cases")
    assert run.measured.step_time_s == 3.0


@pytest.mark.parametrize("data,expected", [
    ({"cases": []}, "must be a list of 1 to"),
    ({"cases": [{"id": "a", "scenario": {"hardware": "h100-sxm"}}]}, "scenario"),
    ({"scenario": {"hardware": "h100-sxm"}, "measured": {}, "extra": 1}, "unknown field"),
    ({"name": "x"}, "neither a scenario nor a case"),
])
def test_bad_runs_files(data, expected):
    with pytest.raises(InputError, match=expected):
        runs_from_data(data, "run.yaml")


def test_logs_with_a_cases_file_are_refused(tmp_path):
    p = tmp_path / "cases.yaml"
    p.write_text("cases:\n- id: a\n  scenario: {hardware: h100-sxm}\n  measured: {step_time_s: 1.0}\n")
    with pytest.raises(InputError, match="already holds its measured runs"):
        load_runs(p, [LOGS / "step_times.csv"])


def test_measured_figures_convert_to_a_step():
    """tokens/s: 1,000 sequences x 1,000 tokens / 250,000 tok/s = 4 s; samples/s: 1,000 / 250 =
    4 s; MFU: 6e9 FLOP/token x 1e6 tokens / (0.5 x 8 GPUs x 1e15 FLOP/s) = 1.5 s."""
    assert MeasuredRun(tokens_per_s=2.5e5).step_s_for(1000, 1000, 8, 1.0, 1.0) == (4.0, "tokens/s")
    assert MeasuredRun(samples_per_s=250.0).step_s_for(1000, 1000, 8, 1.0, 1.0) == (4.0, "samples/s")
    step, basis = measured_from_mapping({"mfu": 0.5}).step_s_for(1000, 1000, 8, 6e9, 1e15)
    assert step == pytest.approx(1.5) and basis == "MFU"


def test_runs_per_log_and_per_diagnosis_are_bounded():
    """Each run is evaluated a few hundred times by a fit: one log holds, and one diagnosis or
    anchor takes, at most ``limits.MAX_OBSERVED_RUNS``."""
    n = limits.MAX_OBSERVED_RUNS + 1
    with pytest.raises(InputError, match=f"{n} runs; at most {limits.MAX_OBSERVED_RUNS}"):
        parse_log("".join(f"- step_time_s: {i + 1}.0\n" for i in range(n)), "x.yaml")
    import perfmodel as pm
    run = pm.observed_run(pm.load_scenario(EXAMPLE), {"step_time_s": 15.0})
    with pytest.raises(InputError, match="give 1 to"):
        pm.diagnose([run] * n)
    with pytest.raises(InputError, match="give 1 to"):
        pm.fit_anchor([run] * n)


def test_a_real_step_check_measurement_reads_and_diagnoses():
    """calibration's step-check writes a measured block: five eager-PyTorch steps of a 4-layer
    Llama 3 8B on one H100 (1.38833, 1.38594, 1.39116, 1.38906, 1.38897 s). The steady state is
    the median of the last half: median(1.39116, 1.38906, 1.38897) = 1.38906 s; the file's other
    keys (device, versions) are its own record."""
    run_dir = (Path(__file__).resolve().parents[2] / "calibration" / "results" / "nvidia-h100-80gb-hbm3-2026-11-22"
               / "step_check_llama3-8b_4l_s8192")
    (run,) = load_runs(run_dir / "scenario.yaml", [run_dir / "measured.yaml"])
    assert run.measured.steady_step_s() == pytest.approx(1.3890554, rel=1e-6)
    import perfmodel as pm
    d = pm.diagnose([run])
    assert d.runs[0].measured_memory_bytes == pytest.approx(54.384281635284424 * GIBI)
    assert d.causes and d.causes[0].lens == "co-design"
