"""Traces in and out (issue 49): ``perfmodel trace`` writes the Trace Event Format that Perfetto and
chrome://tracing read; ``diagnose --trace`` reads a PyTorch profiler trace with bounds, classes its
kernels and compares each class with the prediction."""

import json
from pathlib import Path

import pytest
from support.profiler_trace import EXPECTED_COMMUNICATION_TOTAL_US, EXPECTED_PER_STEP_US, trace

import perfmodel as pm
from perfmodel.cli import main
from perfmodel.spec.errors import InputError
from perfmodel.spec.observed.profiler_trace import parse_trace, read_trace
from perfmodel.studies.observed.trace_compare import kernel_class, measured_classes
from perfmodel.studies.views.trace_classes import CLASSES, predicted_classes

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "perfmodel" / "data" / "example_scenario.yaml"
FIXTURE = ROOT / "tests" / "data" / "traces" / "pytorch_profiler_small.json"


def _check_trace_event_format(doc: dict):
    """The JSON object form of Google's Trace Event Format: traceEvents, each complete event with
    name, cat, ph 'X', integer pid and tid, ts and dur in microseconds (finite, dur >= 0); metadata
    events ph 'M' naming processes and threads; displayTimeUnit 'ms' or 'ns'."""
    assert set(doc) >= {"traceEvents"} and doc.get("displayTimeUnit") in ("ms", "ns")
    for e in doc["traceEvents"]:
        assert e["ph"] in ("X", "M") and isinstance(e["name"], str)
        assert type(e["pid"]) is int and type(e["tid"]) is int
        if e["ph"] == "X":
            assert isinstance(e["cat"], str) and e["ts"] >= 0 and e["dur"] >= 0
            assert isinstance(e.get("args", {}), dict)
        else:
            assert e["name"] in ("process_name", "thread_name", "process_sort_index")


def test_trace_writes_the_trace_event_format(tmp_path, capsys):
    out = tmp_path / "step.json"
    assert main(["trace", str(EXAMPLE), "-o", str(out)]) == 0
    assert "ui.perfetto.dev" in capsys.readouterr().out
    doc = json.loads(out.read_text())
    _check_trace_event_format(doc)
    x = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert {e["cat"] for e in x} == set(CLASSES)
    assert {e["pid"] for e in x} == set(range(4))                     # pp = 4: one process per rank
    names = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
    assert names == {"compute", "comm", "tail"}
    # events on one thread never overlap (Perfetto nests slices; these must sit side by side)
    for pid in range(4):
        for tid in (1, 2, 3):
            spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in x if e["pid"] == pid and e["tid"] == tid)
            assert all(a[1] <= b[0] + 1e-6 for a, b in zip(spans, spans[1:])), (pid, tid)
    assert doc["otherData"]["microbatches_total"] == 64


def test_trace_of_the_whole_step_matches_the_prediction():
    """Every micro-batch is drawn (64 <= 256): the last event ends at the timeline's makespan, which
    is the predicted step within 1% (the timeline simulates the schedule the step model prices in
    closed form: 15.19 s against 15.24 s), and rank 0's events tile its span with no gap unlabelled."""
    sc = pm.load_scenario(EXAMPLE)
    doc = pm.trace(sc)
    x = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    end_s = max(e["ts"] + e["dur"] for e in x) / 1e6
    from perfmodel.studies.views.timeline import scenario_timeline
    assert end_s == pytest.approx(scenario_timeline(pm.resolve(sc), 256).makespan_s, rel=1e-9)
    assert end_s == pytest.approx(pm.predict(sc).step_time_s, rel=0.01)
    rank0 = sorted((e["ts"], e["ts"] + e["dur"]) for e in x if e["pid"] == 0 and e["tid"] in (1, 2))
    assert rank0[0][0] == 0.0
    assert all(abs(a[1] - b[0]) < 1e-3 for a, b in zip(rank0, rank0[1:]))    # us: op, comm and bubble abut


def test_the_fixture_is_what_its_generator_writes():
    assert json.loads(FIXTURE.read_text()) == trace()


def test_measured_classes_of_the_fixture():
    m = measured_classes(read_trace(FIXTURE))
    assert m["steps"] == 2
    for k, us in EXPECTED_PER_STEP_US.items():
        assert m[k] == pytest.approx(us * 1e-6, rel=1e-9), k
    assert m["communication_total"] == pytest.approx(EXPECTED_COMMUNICATION_TOTAL_US * 1e-6, rel=1e-9)


@pytest.mark.parametrize("name, cls", [
    ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "communication"),
    ("void dpsk::ep::internode::dispatch<false, 8, true, 8>(int4*)", "communication"),
    ("void flash::compute_attn_ws<Flash_fwd_kernel_traits>", "attention"),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3", "attention"),
    ("void cutlass::device_kernel<dpsk::grouped_gemm::cuda::Kernel>", "gemm"),
    ("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTN", "gemm"),
    ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn", "gemm"),
    ("void layer_norm::ln_fwd_kernel<layer_norm::Kernel_traits>", "elementwise"),
    ("triton_poi_fused_add_mul_0", "elementwise"),
])
def test_kernel_names_are_classed(name, cls):
    assert kernel_class(name) == cls


def test_diagnose_trace_gives_measured_against_predicted_per_class(capsys):
    assert main(["diagnose", str(EXAMPLE), "--trace", str(FIXTURE), "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    rows = {r["class"]: r for r in d["rows"]}
    assert set(rows) == {*CLASSES, "step"} and d["steps"] == 2 and d["device_name"] == "NVIDIA H100 80GB HBM3"
    p = predicted_classes(pm.resolve(pm.load_scenario(EXAMPLE)))
    for k in CLASSES:
        assert rows[k]["measured_s"] == pytest.approx(EXPECTED_PER_STEP_US[k] * 1e-6, rel=1e-9)
        assert rows[k]["predicted_s"] == pytest.approx(p[k], rel=1e-12)
    # the classes the prediction splits the step into add up to the predicted step
    assert sum(p[k] for k in CLASSES) == pytest.approx(p["step"], rel=1e-9)
    assert main(["diagnose", str(EXAMPLE), "--trace", str(FIXTURE)]) == 0
    assert "measured / predicted" in capsys.readouterr().out


def test_the_reader_is_bounded_and_says_what_is_wrong(tmp_path, monkeypatch, capsys):
    import perfmodel.spec.observed.profiler_trace as pt
    with pytest.raises(InputError, match="traceEvents"):
        parse_trace({"events": []}, "trace(x)")
    with pytest.raises(InputError, match="no GPU kernels"):
        parse_trace({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 1}]}, "t")
    with pytest.raises(InputError, match=r"traceEvents\[0\]\.dur"):
        parse_trace({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 0, "dur": float("nan")}]}, "t")
    monkeypatch.setattr(pt, "MAX_TRACE_EVENTS", 5)
    with pytest.raises(InputError, match="at most 5"):
        parse_trace(trace(), "t")
    monkeypatch.setattr(pt, "MAX_TRACE_BYTES", 1000)
    with pytest.raises(InputError, match="1,000|1000"):
        read_trace(FIXTURE)
    bad = tmp_path / "bad.json"
    bad.write_text("[" * 100_000)
    monkeypatch.setattr(pt, "MAX_TRACE_BYTES", 10**6)
    with pytest.raises(InputError, match="not JSON"):
        read_trace(bad)
    assert main(["diagnose", str(EXAMPLE), "--trace", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "not JSON" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


KERNEL_NAMES = {"gemm": "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", "attention": "void flash::flash_fwd_kernel<>",
                "elementwise": "void at::native::vectorized_elementwise_kernel<4>",
                "communication": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"}


def _as_profiler_trace(doc: dict, rank: int = 0) -> dict:
    """The predicted trace's rank as a PyTorch profiler would record it: each non-idle event a kernel
    named as its class's library names it, on its stream, one ProfilerStep."""
    events = [{"ph": "X", "cat": "kernel", "name": KERNEL_NAMES[e["cat"]], "pid": 0, "tid": e["tid"], "ts": e["ts"],
               "dur": e["dur"], "args": {"device": 0, "stream": e["tid"]}}
              for e in doc["traceEvents"] if e["ph"] == "X" and e["pid"] == rank and e["cat"] != "idle"]
    return {"traceEvents": events + [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1,
                                      "tid": 1, "ts": 0, "dur": 1}]}


def test_the_predicted_trace_read_back_is_the_prediction():
    """Cross-check of writer, reader and classes: the predicted step of a job without a pipeline,
    written as a trace and read back as a profiler trace, gives every class's predicted time
    (a different path: event intervals and name patterns against the step model's breakdown)."""
    from perfmodel.studies.observed.trace_compare import compare_trace
    sc = pm.parse_scenario({**pm.scenario_to_dict(pm.load_scenario(EXAMPLE)), "parallelism": {
        "tp": 8, "pp": 1, "vpp": 1, "cp": 1, "sequence_parallel": True, "zero_stage": 1}})
    c = compare_trace(parse_trace(_as_profiler_trace(pm.trace(sc)), "round trip"), pm.resolve(sc))
    for row in c.rows:   # idle after the last kernel (the host's 60 us per step) lies outside a trace's window
        assert row.measured_s == pytest.approx(row.predicted_s, rel=1e-6, abs=1e-4), row.kernel_class
    assert {r.kernel_class: r.measured_s for r in c.rows}["communication"] > 1.0     # TP traffic exposed
