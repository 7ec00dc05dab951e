"""The public API is the one path: the Python API, the CLI and the search give the same numbers
for every published run, to the last digit; results serialise to the CLI's JSON; a scenario
that still names software options at the top level loads, with one note."""

from __future__ import annotations

import contextlib
import io
import json
import re
import warnings
from pathlib import Path

import pytest
import yaml
from support import ROOT

import perfmodel as pm
from perfmodel.cli import main
from perfmodel.spec.scenario import MovedKeysNote
from perfmodel.studies.observed.validation import load_cases
from perfmodel.studies.search.search import PINNABLE

CASES = [c for c in load_cases(ROOT / "perfmodel" / "data" / "published_runs.yaml") if c.get("scenario")]


def _cli_json(argv) -> tuple[int, dict | None, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, (json.loads(out.getvalue()) if code == 0 else None), err.getvalue()


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_api_cli_and_search_agree_on_every_published_run(case, tmp_path):
    try:
        sc = pm.parse_scenario(case["scenario"])
        p = pm.predict(sc)
    except pm.InputError as exc:   # a case the rules refuse: the CLI refuses it with the same line
        path = tmp_path / "s.yaml"
        path.write_text(yaml.safe_dump(case["scenario"]))
        code, _, err = _cli_json(["predict", str(path), "--format", "json"])
        assert code == 2 and str(exc) in err
        return
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(case["scenario"]))
    code, cli, _ = _cli_json(["predict", str(path), "--format", "json"])
    assert code == 0 and cli == p.to_dict()          # JSON floats round-trip exactly: the last digit
    res = pm.search(sc, pm.SearchOptions(pin=PINNABLE, top_k=1))
    if not p.fits_in_memory:                         # the search keeps only layouts that fit
        assert res.best is None and "does not fit in memory" in res.rejected
        return
    c = res.best
    assert pm.predict(c.scenario) == p                  # the row is a scenario predict accepts
    assert (c.step_time_s, c.tokens_per_s_per_gpu, c.mfu, c.memory_per_gpu_bytes, c.bottleneck, c.dp,
            c.num_microbatches) == (p.step_time_s, p.tokens_per_s_per_gpu, p.mfu, p.memory_per_gpu_bytes,
                                    p.bottleneck, p.dp, p.num_microbatches)
    assert c.breakdown_s == p.breakdown_s
    if p.time_to_train_s is not None:
        assert (c.time_to_train_s, c.cost_usd, c.energy_kwh) == (p.time_to_train_s, p.cost_usd, p.energy_kwh)


def test_profile_choice_is_one_argument_with_the_cli_default():
    sc = pm.load_scenario(ROOT / "perfmodel" / "data" / "example_scenario.yaml")
    auto, off = pm.predict(sc), pm.predict(sc, profile=None)
    assert auto.step_time_s != off.step_time_s                   # h100-sxm has a committed profile
    assert pm.predict(sc, profile="auto") == auto
    profile = ROOT / "calibration" / "profiles" / "h100-sxm.yaml"
    assert pm.predict(sc, profile=profile) == auto                 # the same file, named
    assert _cli_json(["predict", "--format", "json", "--profile", "none"])[1] == off.to_dict()
    assert _cli_json(["predict", "--format", "json", "--no-profile"])[1] == off.to_dict()
    with pytest.raises(pm.InputError, match="profile is for 'b200'"):
        pm.predict(sc, profile=ROOT / "calibration" / "profiles" / "b200.yaml")


def test_results_are_frozen_and_serialise_to_the_cli_json(tmp_path):
    sc = pm.load_scenario(ROOT / "perfmodel" / "data" / "example_scenario.yaml")
    d = pm.describe(sc)
    with pytest.raises(AttributeError):
        d.num_gpus = 1
    assert _cli_json(["describe", "--format", "json"])[1] == d.to_dict()
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(pm.scenario_to_dict(sc)))
    opts = pm.SearchOptions(max_micro_batch_size=1, recompute=("none",))
    res = pm.search(sc, opts)
    code, cli, _ = _cli_json(["search", str(path), "--format", "json", "--max-micro-batch-size", "1",
                              "--recompute", "none"])
    drop = {"elapsed_s"}
    assert code == 0 and {k: v for k, v in cli.items() if k not in drop} == {
        k: v for k, v in json.loads(json.dumps(res.to_dict())).items() if k not in drop}


def test_a_mapping_is_parsed_without_opening_files():
    with pytest.raises(pm.InputError, match="unknown hardware '/etc/passwd'"):
        pm.predict({"hardware": "/etc/passwd", "num_gpus": 8, "model": "llama3-8b", "seq_length": 2048,
                    "global_batch_size": 8})


def test_software_options_at_the_top_level_load_with_a_note(tmp_path):
    flat = {"hardware": "h100-sxm", "num_gpus": 8, "model": "llama3-8b", "seq_length": 2048, "global_batch_size": 8,
            "attention_backend": "unfused", "overlap": {"dp": 0.5}}
    nested = {**{k: v for k, v in flat.items() if k not in ("attention_backend", "overlap")},
              "software": {"attention_backend": "unfused", "overlap": {"dp": 0.5}}}
    with pytest.warns(MovedKeysNote, match="attention_backend, overlap moved under software"):
        old = pm.parse_scenario(flat)
    assert old == pm.parse_scenario(nested)
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump(flat))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MovedKeysNote)
        code, out, err = _cli_json(["predict", str(path), "--format", "json"])
    assert code == 0 and out == pm.predict(pm.parse_scenario(nested)).to_dict()
    assert err.strip().splitlines() == ["perfmodel: note: attention_backend, overlap moved under software: "
                                        "(read from the top level this time)"]
    with pytest.raises(pm.InputError, match="given both at the top level and under software"):
        pm.parse_scenario({**flat, "software": {"attention_backend": "flash"}})


def test_formula_functions_take_the_stack_whole():
    """A forgotten option is a TypeError, not a silent default: no formula function has a
    defaulted argument named after a software option."""
    import inspect

    from perfmodel.formulas import activations, compute, memory, traffic, workload
    from perfmodel.spec.software import SOFTWARE_FIELDS
    names = set(SOFTWARE_FIELDS) | {"flash", "dispatcher", "selective_policy"}
    for module in (activations, compute, memory, traffic, workload):
        for fname, fn in inspect.getmembers(module, inspect.isfunction):
            if fn.__module__ != module.__name__:
                continue
            defaulted = {p for p, v in inspect.signature(fn).parameters.items() if v.default is not v.empty}
            assert not defaulted & names, f"{module.__name__}.{fname} defaults {defaulted & names}"


DOC = ROOT / "docs" / "api.md"


def test_the_examples_in_docs_api_run():
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) >= 5
    namespace: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MovedKeysNote)
        with contextlib.redirect_stdout(io.StringIO()):
            for block in blocks:
                exec(compile(block, str(DOC), "exec"), namespace)   # noqa: S102 - the project's own docs


def test_every_exported_name_resolves():
    for name in pm.__all__:
        assert getattr(pm, name) is not None
    assert Path(pm.__file__).parent.name == "perfmodel"
