"""Software histories: the data file, its loader and the arithmetic against the model."""

import pytest
import yaml
from support import spec_predict as predict

from perfmodel.spec.errors import InputError
from perfmodel.studies.observed.history import (
    HISTORY_PATH,
    history_rows,
    load_software_history,
    predicted_tflop_per_s_per_gpu,
)


def test_megatron_core_gb200_history_matches_the_published_table():
    (h,) = load_software_history()
    assert h.scenario.hardware == "gb200-nvl72" and h.scenario.num_gpus == 256
    p = h.scenario.parallelism
    assert (p.tp, p.pp, p.vpp, p.ep) == (1, 8, 4, 32)
    assert len(h.steps) == 13
    assert h.steps[0].tflop_per_s_per_gpu == 494.46 and h.steps[-1].tflop_per_s_per_gpu == 970.01
    # The blog's summary: "a 1.96x performance improvement".
    assert h.steps[-1].tflop_per_s_per_gpu / h.steps[0].tflop_per_s_per_gpu == pytest.approx(1.96, abs=0.005)
    assert [s.dispatcher for s in h.steps] == ["alltoall"] * 3 + ["deepep"] * 7 + ["hybridep"] * 3


def test_prediction_is_tokens_times_model_flops():
    (h,) = load_software_history()
    p = predict(h.scenario)
    assert predicted_tflop_per_s_per_gpu(h) == pytest.approx(p.tokens_per_s_per_gpu * p.model_flops_per_token / 1e12)


def test_rows_are_fractions_of_the_prediction():
    (h,) = load_software_history()
    rows = history_rows(h, 1000.0)
    assert [r["step"] for r in rows] == list(range(1, 14))
    assert rows[0]["fraction_of_model"] == pytest.approx(0.49446)
    assert rows[-1]["measured_tflop_per_s"] == 970.01


def _write(tmp_path, data) -> str:
    path = tmp_path / "h.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_bad_files_name_the_field(tmp_path):
    good = yaml.safe_load(HISTORY_PATH.read_text())
    with pytest.raises(InputError, match="not a perfmodel-software-history/1 file"):
        load_software_history(_write(tmp_path, {"format": "other"}))
    bad_step = yaml.safe_load(HISTORY_PATH.read_text())
    bad_step["series"][0]["steps"][0]["tflop_per_s_per_gpu"] = -1
    with pytest.raises(InputError, match=r"series\[0\]: .*tflop_per_s_per_gpu"):
        load_software_history(_write(tmp_path, bad_step))
    bad_scenario = good
    bad_scenario["series"][0]["scenario"]["num_gpus"] = 0
    with pytest.raises(InputError, match=r"series\[0\]\.scenario.*num_gpus"):
        load_software_history(_write(tmp_path, bad_scenario))
    with pytest.raises(InputError, match="software history: file not found"):
        load_software_history(tmp_path / "missing.yaml")
