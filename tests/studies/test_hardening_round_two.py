"""Issue 48: the inputs that still escaped the one-line error, and the command that wrote into
the installed package. Each test pins one finding of the audit; each fails on the code before
the fix (exit 1 with "internal error", a traceback, a silently overwritten file or a value that
does not read back)."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import pytest
import yaml

from perfmodel.cli import main
from perfmodel.engine.band import BAND_FILE
from perfmodel.spec.errors import InputError
from perfmodel.spec.observed.logs import parse_log

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "perfmodel" / "data" / "published_runs.yaml"
EXAMPLE = ROOT / "perfmodel" / "data" / "example_scenario.yaml"
DIGITS_400 = "1" + "0" * 400


def _one_line_error(capsys, code, *words) -> str:
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err and "internal error" not in err, err
    for w in words:
        assert w in err, err
    return err


def _scenario(**over) -> dict:
    return {**yaml.safe_load(EXAMPLE.read_text()), **over}


def _write(tmp_path, data, name="s.yaml") -> str:
    p = tmp_path / name
    p.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return str(p)


# ------------------------------------------------------------- 2. --fit-bands
def test_fit_bands_without_a_path_writes_nothing(capsys):
    before = BAND_FILE.stat().st_mtime_ns
    with pytest.raises(SystemExit) as exc:
        main(["validate", str(RUNS), "--fit-bands"])
    assert exc.value.code == 2
    assert "--fit-bands" in capsys.readouterr().err
    assert BAND_FILE.stat().st_mtime_ns == before


def test_fit_bands_never_writes_into_an_installed_package(monkeypatch, tmp_path, capsys):
    """Installed (no pyproject.toml beside the package): the package's band table is refused."""
    import perfmodel.spec.paths as paths
    monkeypatch.setattr(paths, "PROJECT_DIR", tmp_path)
    before = BAND_FILE.stat().st_mtime_ns
    cases = tmp_path / "one.yaml"
    data = yaml.safe_load(RUNS.read_text())
    cases.write_text(yaml.safe_dump({**data, "cases": [c for c in data["cases"] if c.get("scenario")][:1]}))
    _one_line_error(capsys, main(["validate", str(cases), "--fit-bands", str(BAND_FILE)]),
                    "inside the installed perfmodel package")
    assert BAND_FILE.stat().st_mtime_ns == before


def test_fit_bands_on_one_source_says_there_is_no_held_out_figure(tmp_path, capsys):
    data = yaml.safe_load(RUNS.read_text())
    cases = tmp_path / "one.yaml"
    cases.write_text(yaml.safe_dump({**data, "cases": [c for c in data["cases"] if c.get("scenario")][:1]}))
    assert main(["validate", str(cases), "--fit-bands", str(tmp_path / "bands.yaml")]) == 0
    out = capsys.readouterr().out
    assert "nan" not in out and "n/a" in out


# ------------------------------------------------------------- 5. log readers
MEGATRON = " iteration {i}/ 100 | elapsed time per iteration (ms): {t} | global batch size: 128 |\n"
NEMO = "Training epoch 0, iteration {i}/49 | global_batch_size: {g} | train_step_timing in s: {t}\n"


@pytest.mark.parametrize("text,words", [
    ("".join(MEGATRON.format(i=i, t="1e309") for i in (1, 2)), ("Megatron-LM", "step_times_s", "inf")),
    ("".join(MEGATRON.format(i=i, t="0.0") for i in (1, 2)), ("Megatron-LM", "step_times_s")),
    ("".join(NEMO.format(i=i, g=128, t="1e309") for i in (0, 1)), ("NeMo", "step_times_s", "inf")),
    ("".join(NEMO.format(i=i, g="1e309", t="5.0") for i in (0, 1)), ("NeMo", "global_batch_size")),
    ("num_gpus,step_time_s\nnan,6.4\n", ("num_gpus", "positive whole number")),
    ("num_gpus,step_time_s\ninf,6.4\n", ("num_gpus", "positive whole number")),
    ("step_time_s: " + DIGITS_400 + "\n", ("step_time_s",)),
    ("step_time_s: -" + DIGITS_400 + "\n", ("step_time_s",)),
    ("step_time_s: 5e-324\n", ("step_time_s", "1e-09")),
    ("step_time_s,num_gpus\n" + "x" * 200_000 + ",8\n", ("not a CSV",)),
], ids=["megatron-1e309", "megatron-zero", "nemo-1e309", "nemo-gbs-1e309", "csv-nan-gpus", "csv-inf-gpus",
        "yaml-400-digits", "yaml-minus-400-digits", "yaml-subnormal", "csv-field-too-long"])
def test_a_log_with_an_impossible_figure_is_one_line(text, words):
    with pytest.raises(InputError) as exc:
        parse_log(text, "run.log")
    for w in words:
        assert w in str(exc.value), str(exc.value)


def test_a_csv_with_trailing_commas_is_read():
    """Every row ends with a comma (a spreadsheet's export): the empty last cell is no column."""
    (run,) = parse_log("iteration,step_time_s\n1,6.4,\n2,6.41,\n3,6.40,\n", "run.csv")
    assert run.step_times_s == (6.4, 6.41, 6.40)


def test_a_csv_with_carriage_returns_is_read():
    """Found by the log fuzzing: lines ending in a bare \r (an old Mac export) made csv raise."""
    (run,) = parse_log("iteration,step_time_s\r1,6.4\r2,6.41\r", "run.csv")
    assert run.step_times_s == (6.4, 6.41)


def test_a_trainer_line_with_a_dotted_value_is_skipped_not_fatal():
    (run,) = parse_log("{'train_samples_per_second': ..., 'train_steps_per_second': 0.5}\n", "hf.log")
    assert run.step_time_s == 2.0


@pytest.mark.parametrize("log", ["".join(MEGATRON.format(i=i, t="1e309") for i in (1, 2)),
                                 "iteration,step_time_s\n1,6.4,\n2,6.41,\n", "step_time_s: 5e-324\n"],
                         ids=["megatron-inf", "csv-trailing-comma", "yaml-subnormal"])
def test_diagnose_reads_such_logs_without_a_math_error(tmp_path, capsys, log):
    run = _write(tmp_path, {"scenario": _scenario()}, "run.yaml")
    code = main(["diagnose", run, "--log", _write(tmp_path, log, "run.log" if "iteration " in log else "run.csv")])
    err = capsys.readouterr().err
    assert code in (0, 2) and "internal error" not in err and "math domain" not in err, err


# ---------------------------------------------------- 5. huge integers from YAML
@pytest.mark.parametrize("value", [-(10**400), 10**400, -(10**22)], ids=["-1e400", "1e400", "-1e22"])
def test_validate_with_a_huge_integer_measurement_is_one_line(tmp_path, capsys, value):
    case = {"id": "a", "scenario": _scenario(), "measured": {"step_time_s": value}}
    path = _write(tmp_path, {"format": "perfmodel-cases/1", "cases": [case]})
    _one_line_error(capsys, main(["validate", path]), "step_time_s")
    _one_line_error(capsys, main(["diagnose", path]), "step_time_s")


# ------------------------------------------------- 5. size over several hardware types
def test_input_error_survives_pickling():
    e = pickle.loads(pickle.dumps(InputError("reliability", "the run would never finish")))
    assert isinstance(e, InputError) and str(e) == "reliability: the run would never finish"


def test_size_in_processes_carries_the_input_error_back(tmp_path, capsys):
    path = _write(tmp_path, _scenario(reliability={"checkpoint_interval_s": 1e-300}))
    _one_line_error(capsys, main(["size", path, "--hardware", "h100-sxm,b200", "--gpus", "64,128", "--jobs", "2",
                                  "--no-progress"]), "reliability:")


# ------------------------------------------------------------------ 6. smaller
def test_a_scenario_named_like_a_number_reads_back():
    sys.path.insert(0, str(ROOT / "app"))
    from appkit import state

    from perfmodel.spec.errors import parse_data_text
    from perfmodel.spec.scenario import load_scenario, parse_scenario
    for name in ("1e3", "2E-3", "1.5e13"):
        sc = load_scenario(EXAMPLE).model_copy(update={"name": name})
        again = parse_scenario(parse_data_text(state.scenario_yaml(sc), "scenario"))
        assert again.name == name


@pytest.mark.parametrize("reliability", [{"checkpoint_interval_s": 1e-300},
                                         {"checkpoint_interval_s": 1e-300,
                                          "storage_write_bandwidth_bytes_per_s": 1e6}])
def test_an_impossible_checkpoint_interval_blames_reliability(tmp_path, capsys, reliability):
    path = _write(tmp_path, _scenario(reliability=reliability))
    err = _one_line_error(capsys, main(["predict", path]), "reliability:", "never finish")
    assert "wall_time_s" not in err


def test_an_extreme_but_finite_run_prints_short_figures(tmp_path, capsys):
    path = _write(tmp_path, _scenario(reliability={"gpu_failures_per_gpu_hour": 1000, "restart_s": 1e9}))
    assert main(["predict", path]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("time to train"))
    assert "e+09 years" in line and "," not in line.split("years")[0], line
    assert "$infT" not in out and "nan" not in out


def test_a_link_may_not_repeat_a_key():
    sys.path.insert(0, str(ROOT / "app"))
    from appkit import state
    import base64
    import zlib
    raw = b'{"name": "a", "name": "b"}'
    link = base64.urlsafe_b64encode(zlib.compress(raw)).decode().rstrip("=")
    with pytest.raises(InputError, match="duplicate key 'name'"):
        state.decode_query(link)
