"""Issue 31: no input escapes the one-line error, and nothing a user sends becomes unbounded work.

Each test pins one defect the fuzzing found (12,800 API scenarios, 540 CLI calls, 260 hostile
files): bad input ends as ``<field>: <reason>`` on one line (exit status 2 in the CLI), never as
a traceback, a silently adjusted value or minutes of work; JSON output is valid JSON; and two
physical invariants hold (faster hardware is never slower, goodput tends to 1 as failures vanish).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from perfmodel.cli import main
from perfmodel.spec.errors import InputError

BASE = dict(hardware="h100-sxm", num_gpus=64, model="llama3-70b", seq_length=8192, global_batch_size=128,
            parallelism=dict(tp=4, pp=4, vpp=5, cp=2), precision="bf16")
TINY = dict(name="tiny", num_layers=4, hidden_size=256, num_attention_heads=8, num_query_groups=4,
            ffn_hidden_size=1024, gated_mlp=True, vocab_size=1000)


def _write(tmp_path, text, name="s.yaml") -> str:
    p = tmp_path / name
    p.write_text(text if isinstance(text, str) else yaml.safe_dump(text))
    return str(p)


def _one_line_error(capsys, code) -> str:
    """The command exited 2 with exactly one line on stderr, and no traceback."""
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err and "internal error" not in err, err
    return err


def _input_error(call) -> InputError:
    with pytest.raises(InputError) as info:
        call()
    assert "\n" not in str(info.value)
    return info.value


def _parse(**patch):
    from perfmodel.spec.scenario import parse_scenario
    return parse_scenario({**BASE, **patch})


# ------------------------------------------------------------------------- bounds before work
def test_a_pipeline_layout_is_counted_before_it_is_expanded():
    """'Et*10000000000L' built a 10 GB string before anything checked it."""
    from perfmodel.spec.pipeline_layout import parse

    t0 = time.perf_counter()
    for text in ("Et*10000000000L", "Et*1000000L", "E(t*1000|)*1000L", "Et*" + "9" * 5000 + "L"):
        err = _input_error(lambda: parse(text))
        assert err.field == "pipeline_layout"
    assert time.perf_counter() - t0 < 1.0
    assert len(parse("Et*4|(t*4|)*14tmL")) == 16          # DeepSeek-V3's recipe layout still parses


def test_a_million_layers_is_refused_at_parse_time():
    """num_layers: 1000000 ran for minutes."""
    from perfmodel.spec import limits

    t0 = time.perf_counter()
    err = _input_error(lambda: _parse(model={**TINY, "num_layers": 1_000_000}))
    assert "model.num_layers" in str(err) and f"{limits.MAX_NUM_LAYERS}" in str(err)
    assert time.perf_counter() - t0 < 1.0


@pytest.mark.parametrize("field,value", [
    ("num_gpus", 2 ** 63), ("num_gpus", 2 ** 64 + 1), ("global_batch_size", 2 ** 70), ("seq_length", 10 ** 30),
])
def test_integers_past_int64_name_their_field(field, value):
    """Integers >= 2**63 reached numpy and ended in an OverflowError."""
    err = _input_error(lambda: _parse(**{field: value}))
    assert f"{field}: Input should be less than or equal to" in str(err)


def test_an_integer_of_5000_digits_is_one_line(tmp_path, capsys):
    text = yaml.safe_dump(BASE).replace("num_gpus: 64", "num_gpus: " + "1" * 5000)
    err = _one_line_error(capsys, main(["predict", _write(tmp_path, text)]))
    assert "4,300 digits" in err


@pytest.mark.parametrize("name,text", [
    ("deep.json", "[" * 100_000 + "]" * 100_000),
    ("deep.yaml", "a:\n" + "".join("  " * i + "- \n" for i in range(1, 200))),
])
def test_deep_nesting_is_refused(tmp_path, capsys, name, text):
    """A JSON file nested 100,000 deep ended in a RecursionError (exit 1)."""
    err = _one_line_error(capsys, main(["predict", _write(tmp_path, text, name)]))
    assert "nested" in err


def test_names_are_bounded():
    """Names and ids are labels: at most limits.MAX_NAME_LENGTH characters (a 300-character name
    was taken as it was)."""
    from perfmodel.spec import limits

    err = _input_error(lambda: _parse(name="x" * 300))
    assert err.reason.startswith("name:") and str(limits.MAX_NAME_LENGTH) in err.reason


def test_hardware_variant_of_itself_is_refused():
    """Regression test for db00de8 (parse_hardware refuses a spec that is a variant of itself);
    it passes on the code before this change too."""
    from perfmodel.spec.hardware import load_hardware, parse_hardware

    data = load_hardware("h100-sxm").model_dump(mode="json", exclude_none=True)
    data["variant_of"] = data["id"]
    err = _input_error(lambda: parse_hardware(data))
    assert err.field == "hardware.variant_of" and "itself" in err.reason


# ------------------------------------------------------------------------------ strict parsing
def _hardware_yaml(**gpu_patch) -> str:
    from perfmodel.spec.hardware import load_hardware

    data = load_hardware("h100-sxm").model_dump(mode="json", exclude_none=True)
    data["id"] = "h100-test"
    data["gpu"].update(gpu_patch)
    return yaml.safe_dump(data)


def test_inf_in_a_hardware_file_names_the_field(tmp_path, capsys):
    """.inf in hardware YAML was accepted and printed Infinity into the JSON output."""
    hw = _write(tmp_path, _hardware_yaml(hbm_bandwidth_gb_per_s=float("inf")), "hw.yaml")
    scenario = _write(tmp_path, {**BASE, "hardware": hw})
    err = _one_line_error(capsys, main(["predict", scenario, "--format", "json"]))
    assert "gpu.hbm_bandwidth_gb_per_s: Input should be a finite number" in err


def test_training_tokens_inf_blames_training_tokens():
    """training_tokens: .inf was accepted and then blamed wall_time_s."""
    err = _input_error(lambda: _parse(training_tokens=float("inf")))
    assert err.reason.startswith("training_tokens:")


@pytest.mark.parametrize("value", ["64", True, 64.0])
def test_numbers_must_be_numbers(value):
    """'64' was taken as 64 and true as 1 (a one-GPU job)."""
    err = _input_error(lambda: _parse(num_gpus=value))
    assert "num_gpus: Input should be a valid integer" in str(err)


def test_numbers_must_be_numbers_in_every_input():
    from perfmodel.spec.cost import parse_cost_model
    from perfmodel.spec.hardware import load_hardware, parse_hardware
    from perfmodel.spec.presets import parse_model
    from perfmodel.studies.search.search import parse_search_options

    assert "usd_per_gpu_hour" in str(_input_error(lambda: parse_cost_model({"usd_per_gpu_hour": "3"})))
    assert "top_k" in str(_input_error(lambda: parse_search_options({"top_k": True})))
    assert "num_layers" in str(_input_error(lambda: parse_model({**TINY, "num_layers": "4"})))
    assert "zero_stage" in str(_input_error(lambda: _parse(parallelism={"zero_stage": True})))
    hw = load_hardware("h100-sxm").model_dump(mode="json", exclude_none=True)
    hw["gpu"]["num_sms"] = "132"
    assert "gpu.num_sms" in str(_input_error(lambda: parse_hardware(hw)))


def test_exponent_floats_without_a_dot_are_numbers(tmp_path):
    """YAML 1.1 reads 1e12 as a string; strict fields would refuse it, so it is a float."""
    from perfmodel.spec.scenario import load_scenario

    text = yaml.safe_dump(BASE) + "training_tokens: 15e12\n"
    assert load_scenario(_write(tmp_path, text)).training_tokens == 15e12


def test_duplicate_yaml_keys_are_an_error(tmp_path, capsys):
    """A second num_gpus silently replaced the first."""
    text = yaml.safe_dump(BASE) + "num_gpus: 16\n"
    err = _one_line_error(capsys, main(["predict", _write(tmp_path, text)]))
    assert "duplicate key 'num_gpus'" in err


def test_duplicate_json_keys_are_an_error(tmp_path, capsys):
    text = json.dumps(BASE)[:-1] + ', "num_gpus": 16}'
    err = _one_line_error(capsys, main(["predict", _write(tmp_path, text, "s.json")]))
    assert "duplicate key 'num_gpus'" in err


@pytest.mark.parametrize("key", ["num_gpus\nsecond line", "a\rb", "tab\tkey\x00"])
def test_keys_with_control_characters_give_one_line(tmp_path, capsys, key):
    """A key with a newline gave a two-line error."""
    text = yaml.safe_dump({**BASE, key: 1})
    err = _one_line_error(capsys, main(["predict", _write(tmp_path, text)]))
    assert "unknown field" in err
    assert not any(c in err for c in "\r\t\x00"), repr(err)      # shown as escapes, not as themselves


def test_input_error_is_one_line_whatever_it_is_given():
    err = InputError("a\nb", "c\r\nd\x00e\u2028f")
    assert "\n" not in str(err) and "\r" not in str(err) and "\u2028" not in str(err)
    assert str(err) == "a\\nb: c\\r\\nd\\x00e\\u2028f"


def test_a_deep_list_in_any_field_is_one_line():
    deep: object = 1
    for _ in range(5000):
        deep = [deep]
    for patch in (dict(num_gpus=deep), dict(parallelism=dict(zero_stage=deep)), dict(name=deep)):
        _input_error(lambda: _parse(**patch))


@pytest.mark.parametrize("case,field", [
    (dict(id="a", scenario=dict(num_gpus=8), measured=dict(step_time_s=1.0)), "scenario.global_batch_size"),
    (dict(id="a", scenario=dict(num_gpus=8, global_batch_size=8, seq_length=8), measured=dict(step_time_s="abc")),
     "measured.step_time_s"),
    (dict(id=["a"], scenario=None), "cases[0].id"),
])
def test_validate_checks_what_it_reads_from_a_case(tmp_path, capsys, case, field):
    """A case without a batch size, or with a text step time, ended in a KeyError or ValueError."""
    err = _one_line_error(capsys, main(["validate", _write(tmp_path, {"cases": [case]})]))
    assert field in err


# --------------------------------------------------------------------------------- file readers
@pytest.mark.parametrize("content", [b"", b"   \n", b"\x89PNG\r\n\x1a\n\x00\x00", "caf\xe9: 1\n".encode("latin-1")])
@pytest.mark.parametrize("command", ["predict", "validate"])
def test_empty_and_binary_files_are_one_line(tmp_path, capsys, content, command):
    p = tmp_path / "s.yaml"
    p.write_bytes(content)
    _one_line_error(capsys, main([command, str(p)]))


def test_a_directory_is_one_line(tmp_path, capsys):
    err = _one_line_error(capsys, main(["predict", str(tmp_path)]))
    assert "directory" in err


def test_a_huge_file_is_refused_before_it_is_read(tmp_path, capsys):
    """Every reader checks the size with stat before it reads (a 112 MB sparse file)."""
    big = tmp_path / "s.yaml"
    with open(big, "wb") as fh:
        fh.truncate(112 * 2**20)
    t0 = time.perf_counter()
    err = _one_line_error(capsys, main(["predict", str(big)]))
    assert "too large" in err
    assert time.perf_counter() - t0 < 5.0


def test_output_on_a_full_device_is_one_line(capsys):
    """Writing a result where the disk is full is a one-line error, not a traceback."""
    from perfmodel.spec.errors import write_text_file

    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    err = _input_error(lambda: write_text_file("/dev/full", "x" * 100_000, "--output"))
    assert err.field == "--output" and "No space left" in err.reason


# -------------------------------------------------------------------------------------- physics
def _faster(hw_id: str, **factors) -> dict:
    from perfmodel.spec.hardware import load_hardware

    data = load_hardware(hw_id).model_dump(mode="json", exclude_none=True)
    data["id"] = f"{hw_id}-faster"
    f = factors.get("flops", 1.0)
    data["gpu"]["peak_dense_tflop_per_s"] = {k: v * f for k, v in data["gpu"]["peak_dense_tflop_per_s"].items()}
    return data


@pytest.mark.parametrize("scenario", [
    # CP ring traffic and FSDP gathers both hid behind the same attention kernels: halving them
    # exposed both and the step grew 0.6% (0.7842 -> 0.7892 s)
    dict(hardware="b200", num_gpus=16, model="llama3-8b", seq_length=4096, global_batch_size=8,
         parallelism=dict(tp=8, cp=2, zero_stage=3)),
    # host-bound: the micro-batch lasts as long as its dispatch, but pipeline sends hid only
    # behind its GPU time, which shrank (0.0058823 -> 0.0058976 s)
    dict(hardware="b200", num_gpus=16, model=TINY, seq_length=512, global_batch_size=64,
         parallelism=dict(tp=1, pp=2)),
])
def test_twice_the_flops_is_never_slower(scenario):
    from support import spec_predict as predict

    from perfmodel.spec.scenario import parse_scenario

    slow = predict(parse_scenario(scenario)).step_time_s
    fast = predict(parse_scenario({**scenario, "hardware": _faster(scenario["hardware"], flops=2.0)})).step_time_s
    assert fast <= slow


def test_collectives_share_the_compute_they_hide_behind():
    """FSDP hides behind what CP leaves of the layer: with CP traffic as long as the attention,
    the FSDP exposure equals what the other compute cannot hide."""
    import numpy as np

    from perfmodel.formulas.overlap import exposed_s, window_used_s

    attention, other, cp, fsdp = 1.0, 0.5, 1.0, 2.0
    used = window_used_s(cp, attention, 1.0)
    assert used == 1.0
    assert exposed_s(fsdp, attention + other - used, 1.0) == pytest.approx(1.5)
    # compute shrinking never costs more than it saves
    for w in np.linspace(0.1, 3.0, 30):
        total = w + exposed_s(cp, w, 1.0) + exposed_s(fsdp, w + other - window_used_s(cp, w, 1.0), 1.0)
        total_more = (w + 0.01) + exposed_s(cp, w + 0.01, 1.0) + exposed_s(
            fsdp, w + 0.01 + other - window_used_s(cp, w + 0.01, 1.0), 1.0)
        assert total_more >= total - 1e-12


def test_a_scenario_mapping_naming_a_file_the_system_refuses_is_one_line(tmp_path):
    """A 300-character or NUL-bearing hardware file name through the Python API: the reader's
    one-line error, not the OSError of looking beside the scenario file."""
    from perfmodel.spec.scenario import inline_local_files

    for name in ("x" * 300 + ".yaml", "a\x00b.yaml"):
        with pytest.raises(InputError, match="hardware"):
            inline_local_files({"hardware": name, "num_gpus": 8}, tmp_path)
