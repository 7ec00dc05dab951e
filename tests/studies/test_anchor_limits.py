"""Anchors with limits (issue 49): an anchor of another stack or precision flags the what-if in one
line and widens its band; one of another model family is refused."""

import pytest

import perfmodel as pm
from perfmodel.cli import main
from perfmodel.spec.errors import InputError
from perfmodel.spec.observed.measured import MeasuredRun

BASE = {"hardware": "h100-sxm", "model": "llama3-8b", "seq_length": 8192, "micro_batch_size": 1, "precision": "bf16",
        "num_gpus": 64, "global_batch_size": 128}


def _run(**over):
    sc = pm.parse_scenario({**BASE, **over})
    return pm.observed_run(sc, MeasuredRun(step_time_s=1.1 * pm.predict(sc, profile=None).step_time_s))


def test_an_anchor_of_another_stack_is_flagged_and_its_band_widened():
    what_if = pm.parse_scenario({**BASE, "num_gpus": 128, "global_batch_size": 256,
                                 "software": {"stack": "torchtitan-compile"}})
    same = pm.predict_anchored(what_if, [_run(software={"stack": "torchtitan-compile"})], profile=None)
    other = pm.predict_anchored(what_if, [_run(software={"stack": "nemo-perf"})], profile=None)
    assert not any("stack" in n for n in same.notes)
    flagged = [n for n in other.notes if n.startswith("anchor ran stack")]
    assert flagged == ["anchor ran stack nemo-perf, the what-if torchtitan-compile: its offset need not carry "
                       "across stacks, so the band is widened to the unanchored band about the anchored figure"]
    w, s = (x.band["step_time_s"] for x in (other, same))
    ws, ss = (x.prediction.step_time_s for x in (other, same))
    assert w["p90"] / ws > s["p90"] / ss and w["p10"] / ws < s["p10"] / ss    # wider about its own figure
    assert "widened" in other.band_source


def test_an_anchor_of_another_precision_is_flagged():
    what_if = pm.parse_scenario({**BASE, "precision": "fp8"})
    out = pm.predict_anchored(what_if, [_run()], profile=None)
    assert any(n.startswith("anchor ran precision bf16, the what-if fp8") for n in out.notes)


def test_an_anchor_of_another_model_family_is_refused():
    what_if = pm.parse_scenario({**BASE, "model": "mixtral-8x7b", "parallelism": {"ep": 8}})
    with pytest.raises(InputError) as exc:
        pm.predict_anchored(what_if, [_run()], profile=None)
    assert exc.value.field == "anchor"
    assert "model family dense, the what-if is moe-coarse" in str(exc.value) and "\n" not in str(exc.value)


def test_cli_prints_the_one_line_flag(tmp_path, capsys):
    import yaml
    run = tmp_path / "run.yaml"
    run.write_text(yaml.safe_dump({"scenario": {**BASE, "software": {"stack": "nemo-perf"}},
                                   "measured": {"step_time_s": 2.0}}))
    what = tmp_path / "what.yaml"
    what.write_text(yaml.safe_dump({**BASE, "software": {"stack": "torchtitan-compile"}}))
    assert main(["predict", str(what), "--anchor", str(run), "--profile", "none"]) == 0
    out = capsys.readouterr().out
    assert "Note: anchor ran stack nemo-perf, the what-if torchtitan-compile" in out


def test_anchored_band_held_out_coverage_by_source_and_software():
    """Leave-one-source-out: each source's pairs judged against the p10-p90 of the other sources'."""
    from perfmodel.studies.observed.anchor_check import AnchoredPair, held_out_coverage

    def pair(source, error, changed=()):
        return AnchoredPair(source, "h100", "m", "a", "b", changed, 1.0, error, 0.0)
    pairs = [pair("A", e) for e in (-0.02, 0.0, 0.02)] + [pair("B", e) for e in (-0.01, 0.01)] + \
        [pair("C", 0.5, ("software",))]
    cov = held_out_coverage(pairs)
    assert cov["software_changed"] == {"pairs": 1, "coverage": 0.0}      # far outside the others' band
    assert cov["all"]["pairs"] == 6 and cov["precision_changed"] == {"pairs": 0, "coverage": None}
    assert 0.0 < cov["same_software"]["coverage"] <= 1.0
