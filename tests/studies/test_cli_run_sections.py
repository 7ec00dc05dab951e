"""The command line and the run's scenario sections: ``--set``, the cost flags over the scenario's
cost section, and what ``predict`` prints (goodput, the band, the waterfall)."""

import json

import pytest
import yaml

import perfmodel as pm
from perfmodel.cli import main
from perfmodel.spec.scenario import scenario_to_dict

EXAMPLE = "perfmodel/data/example_scenario.yaml"


def _json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_set_reaches_every_section(capsys):
    d = _json(capsys, ["predict", EXAMPLE, "--format", "json", "--set", "startup.compile_s=86400",
                       "--set", "cost.usd_per_gpu_hour=2", "--set", "reliability.gpu_failures_per_gpu_hour=0"])
    sc = pm.load_scenario(EXAMPLE)
    want = pm.predict(sc.model_copy(update={"startup": pm.Startup(compile_s=86400.0),
                                            "cost": pm.CostModel(usd_per_gpu_hour=2.0),
                                            "reliability": pm.FailureModel(gpu_failures_per_gpu_hour=0.0)}))
    assert d == json.loads(json.dumps(want.to_dict()))
    assert d["cost_usd"] == pytest.approx(d["gpu_hours"] * 2.0, rel=1e-12)


def test_cost_flags_override_the_scenario_cost_section(tmp_path, capsys):
    data = scenario_to_dict(pm.load_scenario(EXAMPLE)) | {"cost": {"usd_per_gpu_hour": 2.0, "pue": 1.1}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    own = _json(capsys, ["predict", str(path), "--format", "json"])
    assert own["cost_usd"] == pytest.approx(own["gpu_hours"] * 2.0, rel=1e-12)
    flagged = _json(capsys, ["predict", str(path), "--format", "json", "--price", "3"])
    assert flagged["cost_usd"] == pytest.approx(flagged["gpu_hours"] * 3.0, rel=1e-12)


@pytest.mark.parametrize("argv, message", [
    (["--set", "reliability.restart=600"], "reliability.restart: unknown field"),
    (["--set", "model.num_layers=3"], "--set: model.num_layers: model is not a mapping"),
    (["--set", "startup.warmup_steps=-1"], "startup.warmup_steps"),
    (["--set", "novalue"], "--set: expected KEY=VALUE"),
    (["--set", "cost.mode=lease"], "cost.mode"),
    (["--set", ".x=1"], "--set: expected a dotted key"),
])
def test_bad_set_is_one_line(argv, message, capsys):
    assert main(["predict", EXAMPLE] + argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_predict_table_shows_goodput_band_and_waterfall(capsys):
    assert main(["predict", EXAMPLE]) == 0
    out = capsys.readouterr().out
    assert "80% band (hopper/dense published runs)" in out
    assert "of wall time trains" in out and "goodput waterfall" in out
    assert "useful, after start-up (goodput)" in out


def test_a_slow_loader_binds_the_step(capsys):
    """8,192 x 128 / 64 = 16,384 tokens per GPU per step at 100 tokens/s take 163.8 s, more than
    the ~15 s the GPUs need: the step waits 163.8 s minus the rest of the step for data."""
    d = _json(capsys, ["predict", EXAMPLE, "--format", "json", "--set", "input_pipeline.loader_tokens_per_s_per_gpu=100"])
    busy = d["step_time_s"] - d["breakdown_s"]["data_wait"]
    assert d["bottleneck"] == "data_wait"
    assert d["breakdown_s"]["data_wait"] == pytest.approx(16_384 / 100 - busy, rel=1e-9)
