"""The framework of a training log, inferred from its format (issue 49): each sample log in
tests/data/logs names its framework and the stack assumed, shown as an assumption the user can
change with --stack or software.stack."""

import json
from pathlib import Path

import pytest

import perfmodel as pm
from perfmodel.cli import main
from perfmodel.spec.errors import InputError
from perfmodel.spec.observed.log_framework import infer_framework

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "tests" / "data" / "logs"
EXAMPLE = ROOT / "perfmodel" / "data" / "example_scenario.yaml"


@pytest.mark.parametrize("log, framework, stack", [
    ("torchtitan_sample.log", "torchtitan", "torchtitan-eager"),
    ("nemo1_sample.log", "NeMo", "nemo-perf"),
    ("nemo2_sample.log", "NeMo", "nemo-perf"),
    ("megatron_sample.log", "Megatron-LM", "megatron-core"),
    ("hf_trainer_sample.log", "HF Trainer", "pytorch-eager"),
    ("lightning_metrics.csv", "Lightning", "pytorch-eager"),
])
def test_each_sample_log_names_its_framework(log, framework, stack):
    g = infer_framework((LOGS / log).read_text())
    assert (g.framework, g.stack) == (framework, stack)


@pytest.mark.parametrize("log", ["unknown.log", "step_times.csv", "measured.yaml"])
def test_a_log_of_no_framework_assumes_nothing(log):
    assert infer_framework((LOGS / log).read_text()) is None


def test_content_refines_the_stack_and_names_the_gpu():
    titan = (LOGS / "torchtitan_sample.log").read_text()
    compiled = "[rank0]:[titan] - root - INFO - Compiling each TransformerBlock with torch.compile\n" + titan
    assert infer_framework(compiled).stack == "torchtitan-compile"
    named = "[rank0]:[titan] - root - INFO - CUDA capacity: NVIDIA H100 80GB HBM3 with 79.11GiB memory\n" + titan
    g = infer_framework(named)
    assert (g.hardware, g.gpu_text) == ("h100-sxm", "H100")
    hf = "FSDP enabled: FullyShardedDataParallel\n" + (LOGS / "hf_trainer_sample.log").read_text()
    assert infer_framework(hf).stack == "pytorch-fsdp-accelerate"
    assert infer_framework("GPU 0: NVIDIA A100-SXM4-80GB\n" + titan).hardware == "a100-sxm-80gb"


def test_diagnose_assumes_the_logs_stack_and_says_so(tmp_path, capsys):
    """The example names no stack: with a torchtitan log the runs are judged as torchtitan's (eager),
    one line says so, and --stack changes it."""
    log = tmp_path / "titan.log"
    log.write_text("[rank0]:[titan] - root - INFO - CUDA capacity: NVIDIA A100-SXM4-80GB\n"
                   + (LOGS / "torchtitan_sample.log").read_text())
    runs, assumed = pm.load_runs_assumed(EXAMPLE, [log])
    assert runs[0].scenario.software.stack == "torchtitan-eager"
    assert assumed[0].startswith("titan.log: a torchtitan log ('[titan]' or 'step: ... tps:' lines): assumed "
                                 "software stack torchtitan-eager; name software.stack in the scenario or pass "
                                 "--stack NAME to change it")
    assert "the log names a A100-SXM4-80GB GPU (a100-sxm-80gb) but the scenario's hardware is h100-sxm" in assumed[0]
    runs, assumed = pm.load_runs_assumed(EXAMPLE, [log], stack="megatron-core")
    assert runs[0].scenario.software.stack == "megatron-core" and assumed == ("software stack megatron-core (from --stack)",)
    with pytest.raises(InputError, match="--stack"):
        pm.load_runs_assumed(EXAMPLE, [log], stack="no-such-stack")
    assert main(["diagnose", str(EXAMPLE), "--log", str(log)]) == 0
    assert capsys.readouterr().out.startswith("Assumed: titan.log: a torchtitan log")
    assert main(["diagnose", str(EXAMPLE), "--log", str(log), "--format", "json", "--stack", "torchtitan-compile"]) == 0
    assert json.loads(capsys.readouterr().out)["assumptions"] == ["software stack torchtitan-compile (from --stack)"]
    assert main(["diagnose", str(EXAMPLE), "--log", str(log), "--stack", "nope"]) == 2


def test_a_scenario_that_names_its_stack_keeps_it(tmp_path):
    import yaml
    sc = yaml.safe_load(EXAMPLE.read_text())
    sc["software"] = {"stack": "nemo-perf"}
    path = tmp_path / "sc.yaml"
    path.write_text(yaml.safe_dump(sc))
    runs, assumed = pm.load_runs_assumed(path, [LOGS / "torchtitan_sample.log"])
    assert runs[0].scenario.software.stack == "nemo-perf"
    assert "the scenario's stack nemo-perf is kept (torchtitan's default would be torchtitan-eager)" in assumed[0]
