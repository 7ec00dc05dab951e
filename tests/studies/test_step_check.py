"""calibration/step_check.py: the scenario it writes is the one the committed runs used, and
bad arguments fail before any GPU work, on one line."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from support import spec_predict as predict

from calibration.step_check import scenario_dict
from perfmodel.spec.errors import InputError
from perfmodel.spec.scenario import parse_scenario

RESULTS = Path(__file__).resolve().parents[2] / "calibration" / "results"
COMMITTED = sorted(RESULTS.glob("*/step_check_*/scenario.yaml"))


def test_committed_runs_exist():
    assert COMMITTED, "no committed step-check runs under calibration/results"


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_committed_scenario_is_what_step_check_writes(path):
    data = yaml.safe_load(path.read_text())
    measured = yaml.safe_load((path.parent / "measured.yaml").read_text())
    layers = data["model"]["num_layers"]
    preset = data["name"].removeprefix("step_check_").rsplit(f"_{layers}l_", 1)[0]
    compiled = data["name"].endswith("_compiled")
    again = scenario_dict(preset, layers, data["seq_length"], data["micro_batch_size"],
                          data["global_batch_size"], data["hardware"], compiled)
    assert again == data
    # The run holds exactly the model the scenario describes: same parameter count.
    result = predict(parse_scenario(data))
    assert result.model_params_total == measured["num_parameters"]


def test_step_check_scenario_has_no_parallelism_and_fewer_layers():
    data = scenario_dict("llama3-8b", 2, 1024, 1, 4, "h100-sxm")
    assert data["num_gpus"] == 1 and data["model"]["num_layers"] == 2
    assert all(data["parallelism"][k] == 1 for k in ("tp", "pp", "cp", "ep"))


def test_a_compiled_run_is_described_by_the_fused_software_options():
    eager = scenario_dict("llama3-8b", 2, 1024, 1, 4, "h100-sxm")
    compiled = scenario_dict("llama3-8b", 2, 1024, 1, 4, "h100-sxm", compiled=True)
    assert eager["software"] == {"elementwise_kernels": "eager", "cross_entropy": "eager_fp32"}
    assert compiled["software"] == {"elementwise_kernels": "fused", "cross_entropy": "fused"}
    assert compiled["name"] == eager["name"] + "_compiled"
    assert {k: v for k, v in compiled.items() if k not in ("software", "name")} == \
        {k: v for k, v in eager.items() if k not in ("software", "name")}


def _is_moe(path) -> bool:
    return "moe" in yaml.safe_load(path.read_text())["model"]


def _step_error(path) -> float:
    """predict's step over the committed run's measured median step, less 1."""
    measured = yaml.safe_load((path.parent / "measured.yaml").read_text())["median_step_s"]
    return predict(parse_scenario(yaml.safe_load(path.read_text()))).step_time_s / measured - 1


def _run_script(name: str, *argv: str, check: bool = False):
    """One of scripts/ (or ``-m`` and a module) run as a user runs it, from the repository root."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    command = [name] if name == "-m" else [str(root / "scripts" / name)]
    return subprocess.run([sys.executable, *command, *argv], cwd=root,
                          capture_output=True, text=True, timeout=120, check=check)


def test_the_committed_step_checks_agree_with_predict_within_ten_percent():
    """The measured steps of the committed dense runs (lent H100s and an H200; eager and compiled,
    4k to 16k tokens) against predict with the project's profiles: a stated tolerance, not a
    fit (nothing in the model is fitted to these steps)."""
    dense = [p for p in COMMITTED if not _is_moe(p)]
    assert len(dense) >= 8
    for path in dense:
        assert abs(_step_error(path)) < 0.10, path.parent.name


def test_the_committed_moe_step_checks_agree_with_predict_within_twenty_percent():
    """The MoE step checks (one H100, Qwen3-30B-A3B and Mixtral 8x7B layers): measured 0.571,
    0.459 and 0.514 s against 0.540, 0.436 and 0.419 predicted. The wider tolerance is their
    documented gap (docs/calibration.md, 'MoE layers on one H100'): the harness's own bf16
    gradient accumulation (about 44 ms in each 4-layer run) and the eager element-wise work,
    against expert GEMMs the model prices per expert where one grouped kernel ran."""
    moe = [p for p in COMMITTED if _is_moe(p)]
    assert len(moe) >= 3
    for path in moe:
        assert abs(_step_error(path)) < 0.20, path.parent.name


def test_bad_arguments_fail_before_the_gpu_run():
    with pytest.raises(InputError) as err:
        scenario_dict("llama3-8b", 4, 4096, 3, 8, "h100-sxm")     # 8 is not a multiple of 3
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("argv,field", [(["--steps", "0"], "--steps"), (["--warmup", "-1"], "--warmup"),
                                        (["--mbs", "3"], "global_batch_size"), (["--preset", "nope"], "model"),
                                        (["--compile", "--warmup", "0"], "--warmup")])
def test_cli_errors_are_one_line_exit_2(argv, field, capsys):
    from calibration.cli import main
    assert main(["step-check", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and field in err and "Traceback" not in err


@pytest.mark.parametrize("preset,layers", [("llama3-8b", 4), ("qwen3-30b-a3b", 4), ("mixtral-8x7b", 2)])
def test_the_timed_model_has_the_scenarios_parameters(preset, layers):
    """The weights step-check builds (``parameter_shapes``, no GPU needed) number exactly what
    perfmodel counts for the scenario: dense, and MoE with its router and expert weights."""
    import math

    from calibration.step_check import _model, parameter_shapes
    data = scenario_dict(preset, layers, 4096, 1, 8, "h100-sxm")
    count = sum(math.prod(s) for s in parameter_shapes(_model(preset, layers)).values())
    assert count == predict(parse_scenario(data)).model_params_total


def test_a_moe_step_check_describes_megatron_cores_unfused_layer():
    data = scenario_dict("qwen3-30b-a3b", 4, 4096, 1, 8, "h100-sxm")
    sc = parse_scenario(data)
    assert sc.software.moe_permute_fusion is False and sc.software.moe_router_fusion is False
    assert sc.software.moe_dispatcher == "alltoall" and data["model"]["moe"]["num_experts"] == 128


@pytest.mark.parametrize("preset,seq,field", [("qwen3-30b-a3b", 4000, "--seq"),       # 4000 x 8 / 128 = 250 rows
                                              ("deepseek-v3", 4096, "--preset"),      # latent attention
                                              ("llama4-maverick", 4096, "--preset")])  # dense layers between
def test_moe_presets_step_check_cannot_build_fail_on_one_line(preset, seq, field):
    with pytest.raises(InputError) as err:
        scenario_dict(preset, 2, seq, 1, 8, "h100-sxm")
    assert err.value.field == field and "\n" not in str(err.value)


def test_the_step_split_script_accounts_for_the_whole_step():
    """calibration/step_check_split.py: the measured classes sum to the profiled GPU time, the model's
    to the predicted step (every operation lands in one class); a folder that is not a step
    check is refused on one line."""
    from calibration import step_check_split as split

    root = Path(__file__).resolve().parents[2]
    run = next(p.parent for p in COMMITTED if _is_moe(p) and "qwen3" in p.parent.name)
    measured, profiled = split.measured_ms((run / "kernels.txt").read_text())
    assert sum(measured.values()) == pytest.approx(profiled) and measured["expert GEMMs"] > 0
    model, predicted, accumulation = split.model_ms(yaml.safe_load((run / "scenario.yaml").read_text()))
    assert sum(model.values()) == pytest.approx(predicted, rel=1e-6) and accumulation > 0
    out = _run_script("-m", "calibration.step_check_split", str(root / "docs"))
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "Traceback" not in out.stderr


@pytest.mark.parametrize("script,argv,fragment", [
    ("attention_probe", ["--seq", "0"], "--seq"), ("attention_probe", ["--seq", "4096", "2097152"], "--seq"),
    ("attention_probe", ["--repeats", "0"], "--repeats"), ("attention_probe", [], "torch"),
    ("eager_ops_probe", ["--seq", "64"], "--seq"), ("eager_ops_probe", ["--repeats", "0"], "--repeats"),
    ("eager_ops_probe", ["--compare", "pyproject.toml"], "--compare"), ("eager_ops_probe", [], "torch")])
def test_the_probes_refuse_bad_arguments_and_a_missing_gpu_on_one_line(script, argv, fragment):
    """calibration/attention_probe.py and calibration/eager_ops_probe.py bound their lengths and repeats
    before any GPU work, the second reads only its own result files for --compare, and without
    torch or a GPU (as here and in CI) each says so in one line."""
    try:
        import torch
        if fragment == "torch" and torch.cuda.is_available():
            pytest.skip("a GPU is present: the probe would run")
    except ImportError:
        pass
    out = _run_script("-m", f"calibration.{script}", *argv)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and fragment in out.stderr and "Traceback" not in out.stderr


def test_the_eager_ops_probe_compares_a_committed_run():
    root = Path(__file__).resolve().parents[2]
    run = min(root.glob("calibration/results/*/eager_ops/eager_ops_s8192_b.yaml"))
    out = _run_script("-m", "calibration.eager_ops_probe", "--compare", str(run), check=True)
    assert out.stdout.count("forward") == 4 and "all " in out.stdout
