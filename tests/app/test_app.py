"""The Streamlit app, page by page, with Streamlit's AppTest (no browser).

Each page renders on the defaults without an exception or an error; a changed widget changes
what is drawn; invalid input shows ``st.error`` with one line, never a traceback.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

APP = Path(__file__).resolve().parents[2] / "app" / "streamlit_app.py"
TIMEOUT_S = 120
PAGES = ("pages_/plan.py", "pages_/compare.py", "pages_/scale.py", "pages_/search.py", "pages_/size.py",
         "pages_/diagnose.py", "pages_/calibration.py")


STUDY_BUTTONS = {"pages_/compare.py": "Compare", "pages_/scale.py": "Run the sweep", "pages_/search.py": "Search",
                 "pages_/size.py": "Size the cluster"}
"""The pages whose studies run only when asked, and the button that asks."""


def _app(page: str | None = None, run: bool = True) -> AppTest:
    """The app on ``page``; a study page with its study run (``run``)."""
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT_S).run()
    if page:
        at.switch_page(page).run()
        if run and page in STUDY_BUTTONS:
            _submit(at, STUDY_BUTTONS[page])
    return at


def _submit(at: AppTest, label: str) -> AppTest:
    """Click the button (a form's submit button) labelled ``label``."""
    return next(b for b in at.button if b.label == label).click().run()


def _open(at: AppTest, group: str) -> AppTest:
    """Show one of the sidebar's groups (only the chosen one is drawn)."""
    return at.selectbox(key="_sidebar_group").set_value(group).run()


def _charts(at: AppTest) -> list[str]:
    """Every Vega-Lite chart on the page, serialised (spec and data)."""
    return [e.proto.SerializeToString().hex() for e in at.get("vega_lite_chart")]


def _specs(at: AppTest) -> list[dict]:
    return [json.loads(e.proto.spec) for e in at.get("vega_lite_chart")]


def _check_chart(spec: dict) -> None:
    """Valid Vega-Lite; every quantitative axis titled with its unit in parentheses."""
    import altair as alt

    alt.vegalite.v6.schema.core.TopLevelSpec.validate(spec)
    titles: dict = {}
    for layer in spec.get("layer", [spec]):
        for ch in ("x", "y"):
            enc = layer.get("encoding", {}).get(ch)
            if enc and enc.get("type") == "quantitative" and enc.get("title"):
                titles.setdefault(ch, []).append(enc["title"])
            elif enc and enc.get("type") == "quantitative":
                titles.setdefault(ch, [])
    for ch, ts in titles.items():
        assert ts, f"quantitative {ch} axis without a title"
        assert all("(" in t and ")" in t for t in ts), f"{ch} title without a unit: {ts}"


def _shown(markdown: str) -> str:
    """Text as the page shows it: the app escapes Markdown in names and messages (``appkit.page.plain``)."""
    return re.sub(r"\\(.)", r"\1", markdown)


def _errors(at: AppTest) -> list[str]:
    return [_shown(e.value) for e in at.error]


def _metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def _assert_clean(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not _errors(at), _errors(at)


def _assert_one_line_error(at: AppTest, *fragments: str) -> None:
    assert not at.exception, [e.value for e in at.exception]
    errors = _errors(at)
    assert errors, "expected st.error"
    assert all("\n" not in e and "Traceback" not in e for e in errors), errors
    for f in fragments:
        assert any(f in e for e in errors), (f, errors)


# ----------------------------------------------------------------------- every page
@pytest.mark.parametrize("page", PAGES)
def test_page_renders_on_defaults(page):
    at = _app(page)
    _assert_clean(at)
    assert at.title, "every page has a title"
    assert _charts(at), "every page draws at least one chart"
    for spec in _specs(at):
        _check_chart(spec)


def test_chart_check_catches_a_missing_unit():
    with pytest.raises(AssertionError):
        _check_chart({"mark": "bar", "data": {"values": []},
                      "encoding": {"x": {"field": "s", "type": "quantitative", "title": "seconds"}}})
    with pytest.raises(Exception):
        _check_chart({"mark": "no-such-mark", "data": {"values": []}})


# ------------------------------------------------------------------------------ plan
def test_plan_defaults_show_llama3_70b_on_64_h100():
    at = _app()
    _assert_clean(at)
    assert "Llama 3 70B" in _shown(at.title[0].value) and "64 x h100-sxm" in _shown(at.title[0].value)
    assert _metric(at, "Step time").endswith("s")
    assert any("Bottleneck" in i.value and "Lens" in i.value for i in at.info)
    assert len(_charts(at)) == 3   # breakdown, memory, and the detail chosen: the goodput waterfall
    for detail in ("Memory per pipeline stage", "Roofline", "Pipeline schedule"):
        at.radio(key="plan_detail").set_value(detail).run()
        _assert_clean(at)
        assert len(_charts(at)) == 3
    assert _metric(at, "Goodput").endswith("%")
    captions = [c.value for c in at.caption]
    assert any(c.startswith("80%: ") and c.endswith(" d") for c in captions)        # time to train's band
    assert any("of wall time trains" in c for c in captions)


@pytest.mark.parametrize("key,value", [("tp", 8), ("num_gpus", 128), ("pp", 8), ("ov_tp", 1.0)])
def test_plan_widget_changes_the_figures(key, value):
    at = _app()
    if key.startswith("ov_"):
        _open(at, "Overlap and ZeRO-3")
    step, charts = _metric(at, "Step time"), _charts(at)
    at.number_input(key=key).set_value(value).run()
    _assert_clean(at)
    assert _metric(at, "Step time") != step, (key, value)
    assert _charts(at) != charts


def test_plan_layout_that_does_not_divide_shows_error():
    at = _app()
    at.number_input(key="num_gpus").set_value(60).run()
    _assert_one_line_error(at, "does not divide num_gpus(60)")


def test_plan_bad_hardware_yaml_shows_error():
    at = _open(_app(), "Hardware")
    at.sidebar.radio(key="hw_source").set_value("Edit YAML").run()
    _assert_clean(at)
    assert "peak_dense_tflop_per_s" in at.text_area(key="hw_yaml_text").value
    at.text_area(key="hw_yaml_text").input("id: x\ngpu: [1, 2\n").run()
    _assert_one_line_error(at, "hardware YAML", "not valid YAML")
    at.text_area(key="hw_yaml_text").input("id: x\nname: y\nbandwith: 3\n").run()
    _assert_one_line_error(at, "hardware YAML")


def test_plan_edited_hardware_yaml_changes_the_figures():
    at = _open(_app(), "Hardware")
    step = _metric(at, "Step time")
    at.sidebar.radio(key="hw_source").set_value("Edit YAML").run()
    text = at.text_area(key="hw_yaml_text").value
    faster = text.replace("bf16: 989.4", "bf16: 1978.8", 1)
    assert faster != text
    at.text_area(key="hw_yaml_text").input(faster).run()
    _assert_clean(at)
    assert _metric(at, "Step time") != step


def test_plan_custom_model_and_moe_fields():
    at = _open(_app(), "Model")
    at.sidebar.radio(key="model_source").set_value("Custom").run()
    _assert_clean(at)
    assert at.number_input(key="m_num_layers").value == 80   # copied from the preset
    step = _metric(at, "Step time")
    at.number_input(key="m_num_layers").set_value(40).run()
    _assert_clean(at)
    assert _metric(at, "Step time") != step
    step = _metric(at, "Step time")
    at.number_input(key="m_num_experts").set_value(8).run()
    at.number_input(key="m_top_k").set_value(2).run()
    _assert_clean(at)
    assert _metric(at, "Step time") != step
    at.number_input(key="m_num_attention_heads").set_value(60).run()   # 60 heads, 8 KV heads
    _assert_one_line_error(at, "num_query_groups")


def test_plan_custom_sliding_window_fields():
    """A windowed preset keeps its window in the custom form; the window changes the step, and
    a full-attention period without a window is a one-line error."""
    at = _open(_app(), "Model")
    at.sidebar.selectbox(key="model_preset").set_value("gpt-oss-120b").run()
    step = _metric(at, "Step time")
    at.sidebar.radio(key="model_source").set_value("Custom").run()
    _assert_clean(at)
    assert at.number_input(key="m_attention_window").value == 128
    assert at.number_input(key="m_full_attention_every").value == 2
    assert _metric(at, "Step time") == step
    at.number_input(key="m_attention_window").set_value(0).run()
    _assert_one_line_error(at, "full_attention_every")
    at.number_input(key="m_full_attention_every").set_value(0).run()
    _assert_clean(at)
    assert _metric(at, "Step time") != step


def test_plan_precision_the_gpu_lacks_shows_error():
    at = _open(_app(), "Batch and precision")
    at.sidebar.selectbox(key="precision").set_value("fp4").run()
    _assert_one_line_error(at, "precision")


def test_plan_hf_config_upload(tmp_path):
    at = _open(_app(), "Model")
    at.sidebar.radio(key="model_source").set_value("Uploaded").run()
    _assert_one_line_error(at, "upload a Hugging Face config.json")
    cfg = (Path(__file__).resolve().parents[1] / "data" / "hf" / "llama3-8b.json").read_bytes()
    at.file_uploader(key="model_upload").upload("config.json", cfg, "application/json").run()
    _assert_clean(at)
    at.file_uploader(key="model_upload").upload("config.json", b"{not json", "application/json").run()
    assert any("not valid JSON" in e for e in _errors(at))


def test_upload_over_the_size_limit_is_refused():
    at = _open(_app(), "Hardware")
    at.sidebar.radio(key="hw_source").set_value("Upload YAML").run()
    at.file_uploader(key="hw_upload").upload("big.yaml", b"# " + b"x" * (1024 * 1024), "application/x-yaml").run()
    assert not at.exception
    assert any("the limit is 1 MiB" in e for e in _errors(at))


# ------------------------------------------------------------ scenario file and link
def test_scenario_download_and_upload_round_trip():
    at = _open(_app(), "Scenario file and link")
    at.number_input(key="tp").set_value(8).run()
    dl = at.get("download_button")
    assert dl, "a download button for the scenario"
    text = Path(APP).parent.parent.joinpath("perfmodel/data/example_scenario.yaml").read_text()
    data = yaml.safe_load(text)
    data["parallelism"]["tp"] = 2
    data["num_gpus"] = 128
    fresh = _open(_app(), "Scenario file and link")
    fresh.file_uploader(key="scenario_upload").upload("s.yaml", yaml.safe_dump(data).encode(), "application/x-yaml").run()
    _assert_clean(fresh)
    assert fresh.number_input(key="tp").value == 2
    assert fresh.number_input(key="num_gpus").value == 128
    assert "128 x h100-sxm" in _shown(fresh.title[0].value)


def test_bad_scenario_upload_shows_error():
    at = _open(_app(), "Scenario file and link")
    at.file_uploader(key="scenario_upload").upload("s.yaml", b"hardware: h100-sxm\nnum_gpus: -1\n", "application/x-yaml").run()
    assert not at.exception
    assert any("scenario" in e for e in _errors(at))


def test_url_holds_the_scenario_and_loads_it_back():
    import sys
    sys.path.insert(0, str(APP.parent))
    from appkit import state

    at = _app()
    at.number_input(key="num_gpus").set_value(128).run()
    encoded = at.query_params[state.QUERY_KEY]
    encoded = encoded[0] if isinstance(encoded, list) else encoded
    sc = state.decode_query(encoded)
    assert sc.num_gpus == 128 and sc.model == "llama3-70b"

    shared = AppTest.from_file(str(APP), default_timeout=TIMEOUT_S)
    shared.query_params[state.QUERY_KEY] = encoded
    shared.run()
    _assert_clean(shared)
    assert shared.number_input(key="num_gpus").value == 128

    broken = AppTest.from_file(str(APP), default_timeout=TIMEOUT_S)
    broken.query_params[state.QUERY_KEY] = "garbage"
    broken.run()
    assert not broken.exception
    assert _errors(broken) == ["The scenario in the link was not loaded (the example is shown): link: the scenario "
                               "in the URL is damaged (not zlib data)"]
    assert broken.number_input(key="num_gpus").value == 64   # the example


# --------------------------------------------------------------------------- compare
def test_compare_widget_changes_the_figures():
    at = _app("pages_/compare.py")
    charts = _charts(at)
    default = set(at.multiselect(key="cmp_hardware").value)
    assert "h100-sxm" in default and "h100-sxm-hbm2e-500w" not in default   # variants only on request
    at.multiselect(key="cmp_hardware").set_value(["h100-sxm", "b200"])
    _submit(at, "Compare")
    _assert_clean(at)
    assert _charts(at) != charts
    table = at.dataframe[0].value
    assert set(table["hardware"]) == {"h100-sxm", "b200"}
    # never off-screen: the decision's columns, then why not (issue 50)
    assert list(table.columns[:7]) == ["hardware", "layout", "fits", "time to train", "cost", "bottleneck", "why not"]
    assert all(p.endswith("/GPU-h") for p in table["$/GPU-h"])


@pytest.mark.parametrize("page, yaml_text, message", [
    ("pages_/compare.py", "just text", "hardware YAML"),
    ("pages_/size.py", "- a list\n", "must be a YAML mapping"),
])
def test_invalid_hardware_yaml_in_the_sidebar_shows_error(page, yaml_text, message):
    at = _open(_app(page), "Hardware")
    at.sidebar.radio(key="hw_source").set_value("Edit YAML").run()
    at.text_area(key="hw_yaml_text").input(yaml_text).run()
    _assert_one_line_error(at, message)


# ----------------------------------------------------------------------------- scale
def test_scale_widget_changes_the_figures():
    at = _app("pages_/scale.py")
    charts = _charts(at)
    at.multiselect(key="scale_counts").set_value([32, 64, 128])
    _submit(at, "Run the sweep")
    _assert_clean(at)
    assert _charts(at) != charts
    assert list(at.dataframe[0].value["GPUs"]) == [32, 64, 128]


def test_scale_without_training_tokens_shows_error():
    at = _open(_app("pages_/scale.py"), "Batch and precision")
    at.number_input(key="training_tokens_b").set_value(0.0).run()
    _submit(at, "Run the sweep")
    _assert_one_line_error(at, "training_tokens")


# ---------------------------------------------------------------------------- search
def test_search_widget_changes_the_figures():
    at = _app("pages_/search.py")
    charts, table = _charts(at), at.dataframe[0].value
    assert set(table["GPUs"]) == {64}              # the sidebar's count only, unless asked
    at.text_input(key="search_counts").input("32, 128")
    _submit(at, "Search")
    _assert_clean(at)
    assert _charts(at) != charts
    at.selectbox(key="search_objective").set_value("cost")
    _submit(at, "Search")
    _assert_clean(at)
    assert "cost" in at.subheader[0].value
    assert table is not None


def test_search_load_layout_into_sidebar():
    at = _app("pages_/search.py")
    best = at.dataframe[0].value.iloc[0]
    at.button(key="search_load").click().run()
    _assert_clean(at)
    layout = {w.rstrip("0123456789"): int(w.lstrip("abcdefghijklmnopqrstuvwxyz")) for w in best["layout"].split()}
    assert at.number_input(key="tp").value == layout["tp"]
    assert at.number_input(key="pp").value == layout["pp"]
    assert at.dataframe[0].value.iloc[0]["layout"] == best["layout"]     # the results stay (issue 50)


def test_search_bad_gpu_counts_show_error():
    at = _app("pages_/search.py")
    at.text_input(key="search_counts").input("32, many")
    _submit(at, "Search")
    _assert_one_line_error(at, "GPU counts")


# ------------------------------------------------------------------------------ size
def test_size_widget_changes_the_figures():
    at = _app("pages_/size.py")
    charts = _charts(at)
    at.number_input(key="size_deadline").set_value(20.0)
    _submit(at, "Size the cluster")
    _assert_clean(at)
    assert _charts(at) != charts


# ----------------------------------------------------------------------- calibration
LOGS = Path(__file__).resolve().parents[1] / "data" / "logs"


def test_diagnose_typed_figures_rank_causes_and_anchor_a_what_if():
    at = _app("pages_/diagnose.py")
    assert any("Type the measured step time" in i.value for i in at.info)
    at.number_input(key="dg_step_time_s").set_value(18.0).run()
    _assert_clean(at)
    text = " ".join(_shown(m.value) for m in at.markdown)
    assert "co-design" in text and "measure " in text
    assert len(_charts(at)) == 2            # sensitivity, cause weights
    for spec in _specs(at):
        _check_chart(spec)
    before = _metric(at, "Anchored tokens/s per GPU")
    at.selectbox(key="dg_wi_prec").set_value("fp8").run()
    _assert_clean(at)
    assert _metric(at, "Anchored tokens/s per GPU") != before
    at.number_input(key="dg_wi_gpus").set_value(60).run()
    _assert_one_line_error(at, "does not divide num_gpus(60)")


def test_diagnose_uploaded_logs():
    at = _app("pages_/diagnose.py")
    at.radio(key="dg_source").set_value("Upload a log").run()
    at.file_uploader(key="dg_log").upload("train.log", (LOGS / "megatron_sample.log").read_bytes(), "text/plain").run()
    _assert_clean(at)
    assert any("first iterations are much slower" in _shown(m.value) for m in at.markdown)
    at.file_uploader(key="dg_log").upload("series.csv", (LOGS / "scaling_series.csv").read_bytes(), "text/csv").run()
    _assert_clean(at)
    assert len(_charts(at)) == 3            # sensitivity, cause weights, efficiency series
    at.file_uploader(key="dg_log").upload("x.log", b"hello\nworld\n", "text/plain").run()
    _assert_one_line_error(at, "not a training log")
    at.file_uploader(key="dg_log").upload("big.log", b"x" * (1024 * 1024 + 1), "text/plain").run()
    _assert_one_line_error(at, "the limit is 1 MiB")


def test_calibration_widget_changes_the_figures():
    at = _app("pages_/calibration.py")
    charts = _charts(at)
    at.selectbox(key="cal_hardware").set_value("a100-sxm-80gb").run()
    _assert_clean(at)
    assert _charts(at) != charts
    at.radio(key="cal_section").set_value("Predicted against measured").run()
    assert any(m.label == "Within ±10%" for m in at.metric)
    tables = [df.value for df in at.dataframe]
    by_hw = next(t for t in tables if "GPU" in t.columns and "cases" in t.columns)
    by_source = next(t for t in tables if "source" in t.columns)
    assert by_source["cases"].sum() == by_hw["cases"].sum() > 0
    fit = next(c.value for c in at.caption if c.value.startswith("Memory fit:"))
    unfit = next((t for t in tables if "usable GiB" in t.columns), None)
    n = 0 if unfit is None else len(unfit)
    assert f"the model says {n} of {by_hw['cases'].sum()} do not" in fit


def test_calibration_shows_the_software_history_against_the_model():
    at = _app("pages_/calibration.py")
    at.radio(key="cal_section").set_value("Maturing software").run()
    _assert_clean(at)
    spec = next(s for s in _specs(at) if "measured_tflop_per_s" in json.dumps(s))
    _check_chart(spec)
    assert any("Same GPUs, maturing software" in h.value for h in at.header)
    assert any("494 to 970 TFLOP/s" in c.value for c in at.caption)


def test_calibration_renders_with_an_invalid_sidebar():
    at = _app("pages_/calibration.py")
    at.number_input(key="num_gpus").set_value(60).run()
    _assert_clean(at)   # the page does not depend on the job


def test_calibration_fits_an_uploaded_nccl_tests_log():
    """A 16-GPU all-reduce log over two hosts (synthetic, tests/support/nccl_logs.py) is fitted on
    the chosen spec and drawn against its points; the fit is keyed by the group it measured, and
    the profile downloads for ``perfmodel predict --profile``."""
    from support.nccl_logs import synthetic_log
    at = _app("pages_/calibration.py")
    at.radio(key="cal_section").set_value("Fit your own measurements").run()
    charts = len(_charts(at))
    at.selectbox(key="cal_upload_hardware").set_value("h100-sxm").run()
    log = synthetic_log("all_reduce", 16, 2, 50e-6, 300e9).encode()
    uploader = at.file_uploader(key="cal_upload")
    assert "up to 1 MiB" in uploader.proto.label and uploader.proto.max_upload_size_mb == 1   # the server's limit
    uploader.upload("all_reduce_perf.txt", log, "text/plain").run()
    _assert_clean(at)
    assert len(_charts(at)) == charts + 1
    assert any(b"collective.all_reduce.scale_out.16.2domains" in e.proto.SerializeToString()
               for e in at.get("vega_lite_chart"))
    assert any("28 records fitted on h100-sxm" in c.value.replace("\\", "") for c in at.caption)
    assert at.get("download_button")


# --------------------------------------------------------------------- pure helpers
def test_query_encoding_round_trip():
    import sys
    sys.path.insert(0, str(APP.parent))
    from appkit import state

    sc = state.default_scenario()
    data = json.loads(json.dumps(state.scenario_to_dict(sc)))
    assert state.decode_query(state.encode_query(data)) == sc
    values = state.widget_values(sc)
    assert state.scenario_from_values(values) == sc


def test_overlap_and_zero3_fields_survive_widgets_url_and_yaml():
    """Scenario extensions the sidebar edits (overlap per kind, TP's ideal overlap = null, the
    ZeRO-3 implementation) come back unchanged through the widgets, the URL and YAML."""
    import sys
    sys.path.insert(0, str(APP.parent))
    from appkit import state
    from perfmodel.spec.scenario import parse_scenario, scenario_to_dict
    data = scenario_to_dict(state.default_scenario())
    data["software"].update(overlap={"tp": None, "fsdp": 0.25, "ep": 1.0}, fsdp_collectives_per_layer=12,
                            fsdp_list_api=True, moe_dispatcher="flex", elementwise_kernels="eager",
                            selective_recompute="op_sac", cross_entropy="eager_fp32", fp8_casts="fused")
    sc = parse_scenario(data)
    ov = sc.software.overlap
    assert ov.tp is None and ov.fsdp == 0.25 and ov.dp == 1.0
    assert state.scenario_from_values(state.widget_values(sc)) == sc
    assert state.decode_query(state.encode_query(json.loads(json.dumps(scenario_to_dict(sc))))) == sc
    assert parse_scenario(yaml.safe_load(state.scenario_yaml(sc))) == sc

    at = _open(_app(), "Scenario file and link")
    at.file_uploader(key="scenario_upload").upload("s.yaml", state.scenario_yaml(sc).encode(), "application/x-yaml").run()
    _assert_clean(at)
    _open(at, "Overlap and ZeRO-3")
    assert at.number_input(key="fsdp_collectives_per_layer").value == 12
    assert at.checkbox(key="fsdp_list_api").value and at.checkbox(key="ov_tp_ideal").value
    assert at.number_input(key="ov_fsdp").value == 0.25 and at.number_input(key="ov_ep").value == 1.0
    _open(at, "Batch and precision")
    assert at.selectbox(key="moe_dispatcher").value == "flex"
    assert at.selectbox(key="elementwise_kernels").value == "eager"
    assert at.multiselect(key="selective_recompute").value == ["op_sac"]
    assert at.selectbox(key="cross_entropy").value == "eager_fp32"
    assert at.selectbox(key="fp8_casts").value == "fused"


def test_recompute_modules_block_recompute_and_offload_survive_the_widgets():
    """Megatron-Core recompute modules (a list), block-method layers, activation offload and a
    pipeline layout round-trip through the sidebar values; op_sac mixed with modules is a one-line error."""
    import sys
    sys.path.insert(0, str(APP.parent))
    from appkit import state
    from perfmodel.spec.errors import InputError
    from perfmodel.spec.scenario import parse_scenario, scenario_to_dict
    data = scenario_to_dict(state.default_scenario())
    for extra, recompute in ((dict(selective_recompute=["layernorm", "core_attn"], recompute_num_layers=3), None),
                             (dict(activation_offload_layers=4), "none"),
                             (dict(pipeline_layout="Et*4|(t*4|)*14tmL"), None)):
        sc = parse_scenario({**data, "software": {**data["software"], **extra},
                             **({"recompute": recompute} if recompute else {})})
        assert state.scenario_from_values(state.widget_values(sc)) == sc
        assert parse_scenario(yaml.safe_load(state.scenario_yaml(sc))) == sc
    for named in ("op_sac", "save_qkv_proj"):
        with pytest.raises(InputError) as e:
            state.selective_recompute_value([named, "mlp"])
        assert e.value.field == "software.selective_recompute" and named in str(e.value)
        assert state.selective_recompute_value([named]) == named
    assert state.selective_recompute_value(["core_attn"]) == "core_attn"


# ------------------------------------------------------------------ software stacks (issue 36)
def test_a_stack_and_its_overrides_survive_widgets_url_and_yaml():
    """A named stack with one option changed comes back as the stack and that change, through the
    widgets, the URL and YAML; the new MoE, dropout and optimizer options too."""
    import sys
    sys.path.insert(0, str(APP.parent))
    from appkit import state
    from perfmodel.spec.scenario import parse_scenario, scenario_to_dict
    data = scenario_to_dict(state.default_scenario())
    data["software"] = {"stack": "torchtitan-2412-eager", "cross_entropy": "fused", "moe_load_imbalance": 1.25,
                        "moe_expert_capacity_factor": 1.5, "attention_dropout": True, "cuda_graphs": True}
    sc = parse_scenario(data)
    assert sc.software.elementwise_kernels == "eager" and sc.software.optimizer_kernels == "foreach"
    assert state.scenario_from_values(state.widget_values(sc)) == sc
    assert scenario_to_dict(state.scenario_from_values(state.widget_values(sc)))["software"] == data["software"]
    assert state.decode_query(state.encode_query(json.loads(json.dumps(scenario_to_dict(sc))))) == sc
    assert parse_scenario(yaml.safe_load(state.scenario_yaml(sc))) == sc

    at = _open(_app(), "Scenario file and link")
    at.file_uploader(key="scenario_upload").upload("s.yaml", state.scenario_yaml(sc).encode(), "application/x-yaml").run()
    _assert_clean(at)
    _open(at, "Software stack")
    assert at.checkbox(key="cuda_graphs").value and at.checkbox(key="attention_dropout").value


def test_choosing_a_stack_sets_its_options_and_changes_the_figures():
    at = _open(_app(), "Software stack")
    step = _metric(at, "Step time")
    at.selectbox(key="stack").set_value("pytorch-fsdp-accelerate").run()
    _assert_clean(at)
    _open(at, "Batch and precision")       # the stack set the options of the other groups
    assert at.selectbox(key="elementwise_kernels").value == "eager"
    assert at.selectbox(key="cross_entropy").value == "eager_fp32"
    assert at.selectbox(key="optimizer_kernels").value == "foreach"
    assert not at.checkbox(key="grad_reduce_in_fp32").value
    assert _metric(at, "Step time") != step
    at.selectbox(key="cross_entropy").set_value("fused").run()     # an override beside the stack
    _assert_clean(at)
    _open(at, "Software stack")
    assert at.selectbox(key="stack").value == "pytorch-fsdp-accelerate"


def test_compare_holds_the_job_and_varies_the_stack():
    at = _app("pages_/compare.py")
    at.radio(key="cmp_vary").set_value("software stack").run()
    _assert_clean(at)
    for spec in _specs(at):
        _check_chart(spec)
    table = at.dataframe[0].value
    assert list(table["stack"]) == ["megatron-core", "nemo-perf", "torchtitan-compile", "pytorch-fsdp-accelerate"]
    assert len(set(table["step time"])) > 1            # the stacks differ on the same job
    at.multiselect(key="cmp_stacks").set_value(["megatron-lm-2021"]).run()
    _assert_clean(at)
    assert "attention_backend unfused" in at.dataframe[0].value["options unlike the sidebar's"][0]
