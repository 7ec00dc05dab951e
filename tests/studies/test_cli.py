"""The command line: contract keys, one-line errors with exit status 2, no tracebacks."""

import json
import subprocess
import sys

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.cli import main

CONTRACT_KEYS = {"step_time_s", "tokens_per_s", "tokens_per_s_per_gpu", "mfu", "memory_per_gpu_bytes",
                 "fits_in_memory", "model_params_total", "model_params_active", "model_flops_per_token",
                 "bottleneck", "breakdown_s"}
TRAINING_KEYS = {"time_to_train_s", "gpu_hours", "cost_usd", "energy_kwh"}


def _write(tmp_path, data, name="s.yaml"):
    p = tmp_path / name
    p.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return str(p)


def test_predict_json_has_the_contract_keys(capsys):
    assert main(["predict", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert CONTRACT_KEYS | TRAINING_KEYS <= set(out)
    assert sum(out["breakdown_s"].values()) == pytest.approx(out["step_time_s"], rel=1e-9)
    assert out["tokens_per_s_per_gpu"] == pytest.approx(out["tokens_per_s"] / 64)


def test_describe_json_shares_key_names(capsys):
    assert main(["describe", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"model_params_total", "model_params_active", "model_flops_per_token",
            "memory_per_gpu_bytes", "fits_in_memory"} <= set(out)


def test_table_output_names_the_bottleneck(capsys):
    assert main(["predict"]) == 0
    assert "bottleneck" in capsys.readouterr().out


BASE = dict(hardware="h100-sxm", num_gpus=64, model="llama3-70b", seq_length=8192, global_batch_size=128,
            parallelism=dict(tp=4, pp=4, vpp=5, cp=2), precision="bf16")


@pytest.mark.parametrize("patch,field", [
    (dict(num_gpus=60), "num_gpus"),
    (dict(hardware="h1000"), "hardware"),
    (dict(model="llama9-1t"), "model"),
    (dict(precision="fp4"), "precision"),
    (dict(bandwith=3), "scenario"),
    (dict(num_gpus=48, parallelism=dict(tp=3)), "parallelism.tp"),
    (dict(global_batch_size=100), "global_batch_size"),
    (dict(seq_length=-5), "scenario"),
])
def test_invalid_input_is_one_line_exit_2(tmp_path, capsys, patch, field):
    data = {**BASE, **patch}
    code = main(["predict", _write(tmp_path, data)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert field in err


def test_inline_model_error_names_its_field_not_the_union_member(tmp_path, capsys):
    """``model`` is a preset name or a mapping; a bad mapping field is reported as such, without
    the preset-name member's "should be a valid string" or pydantic's member tag."""
    model = dict(name="m", num_layers=0, hidden_size=4096, num_attention_heads=32, ffn_hidden_size=14336,
                 vocab_size=128256)
    assert main(["predict", _write(tmp_path, {**BASE, "model": model})]) == 2
    err = capsys.readouterr().err
    assert "model.num_layers: Input should be greater than 0" in err
    assert "valid string" not in err and "function-after" not in err


def test_not_yaml_and_missing_file(tmp_path, capsys):
    assert main(["predict", _write(tmp_path, "a: [1, 2", "bad.yaml")]) == 2
    assert main(["predict", str(tmp_path / "nope.yaml")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.sampled_from(["hardware", "num_gpus", "model", "seq_length", "global_batch_size",
                                        "micro_batch_size", "precision", "recompute", "parallelism", "junk"]),
                       st.one_of(st.integers(-5, 100000), st.text(max_size=8), st.none(), st.booleans(),
                                 st.dictionaries(st.text(max_size=4), st.integers(-2, 9), max_size=3))))
def test_random_garbage_never_tracebacks(tmp_path_factory, data):
    merged = {**BASE, **data}
    path = tmp_path_factory.mktemp("g") / "s.yaml"
    path.write_text(yaml.safe_dump(merged))
    import contextlib
    import io
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["predict", str(path)])
    assert code in (0, 2), err.getvalue()
    assert "Traceback" not in err.getvalue()
    assert "internal error" not in err.getvalue()


def test_console_script_runs_in_a_subprocess():
    r = subprocess.run([sys.executable, "-m", "perfmodel.cli", "predict", "--format", "json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["step_time_s"] > 0

# ------------------------------------------------------------------ issue 31: no input escapes
def _one_line_error(capsys, code) -> str:
    """The command exited 2 with exactly one line on stderr, and no traceback."""
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err and "internal error" not in err, err
    return err


def test_scale_json_has_no_nan(tmp_path, capsys):
    """scale --gpus 3,64 --format json printed NaN for the count where no layout runs."""
    scenario = _write(tmp_path, {**BASE, "training_tokens": 1e12})
    code = main(["scale", scenario, "--gpus", "3,64", "--format", "json", "--recompute", "none",
                 "--max-micro-batch-size", "1"])
    out = capsys.readouterr().out
    assert code == 0

    def refuse(name):
        raise AssertionError(f"{name} in JSON output")
    data = json.loads(out, parse_constant=refuse)
    skipped = next(p for p in data["points"] if p["num_gpus"] == 3)
    assert skipped["tokens_per_s"] is None and skipped["skipped_reason"]


@pytest.mark.parametrize("argv,field", [
    (["scale", "--gpus", "8,16", "--tokens", "inf"], "--tokens"),   # was blamed on wall_time_s
    (["scale", "--gpus", "8,16", "--price", "nan"], "--price"),
    (["scale", "--gpus", "0,8"], "gpus"),
    (["scale", "--gpus", "8," * 100 + "16"], "gpus"),
    (["scale", "--gpus", "99999999999999999999"], "gpus"),          # was an int64 overflow
    (["search", "--top", "100000000"], "search: top_k: Input should be less than or equal to 10000"),
    (["search", "--top", "9" * 400], "search: top_k"),
    (["search", "--max-micro-batch-size", "100000"], "search: max_micro_batch_size"),
])
def test_command_line_numbers_are_bounded_and_finite(tmp_path, capsys, argv, field):
    scenario = _write(tmp_path, {**BASE, "training_tokens": 1e12})
    try:
        code = main([argv[0], scenario, *argv[1:]])
    except SystemExit as exc:      # argparse's own usage errors
        code = exc.code
    assert field in _one_line_error(capsys, code)


def test_validate_json_without_a_runnable_case_is_valid_json(tmp_path, capsys):
    """Means over no case are undefined: null, not NaN, in the JSON."""
    assert main(["validate", _write(tmp_path, {"cases": [dict(id="a", why_not_runnable="x")]}),
                 "--format", "json"]) == 0

    def refuse(name):
        raise AssertionError(f"{name} in JSON output")
    assert json.loads(capsys.readouterr().out, parse_constant=refuse)["mape_tokens_per_s_per_gpu"] is None


def test_a_path_too_long_is_one_line(tmp_path, capsys):
    """A 300-character hardware file name ended in 'File name too long' with exit 1."""
    data = {**BASE, "hardware": "x" * 300 + ".yaml"}
    err = _one_line_error(capsys, main(["predict", _write(tmp_path, data)]))
    assert "too long" in err


def test_stdout_on_a_full_device_is_one_line():
    """Output that cannot be written (a full disk) is one line and exit 2, not Python's
    'Exception ignored' traceback at exit (status 120)."""
    import os

    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "perfmodel.cli", "predict"], stdout=full,
                           stderr=subprocess.PIPE, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "No space left" in r.stderr
