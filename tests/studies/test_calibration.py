"""Calibration: the CPU suite end to end, the parsers, and fits that recover known parameters.

CPU only and fast. Parts that need torch are skipped when it is not installed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from calibration.bench import plan_for, run_suite, workload_gemm_shapes
from calibration.cli import bench_hw_main, calibrate_main
from calibration.fit import Calibration, accuracy_checks, fit_efficiencies, load_profile, write_profile
from calibration.fit_forms import fit_attention, fit_collective_group, fit_gemm, fit_launch, fit_memory
from calibration.parsers import load_any, parse_microbenchmarks, parse_nccl_tests
from calibration.profile import apply_profile
from calibration.published import PUBLISHED_HARDWARE, borrowed_gemm, default_data_path, fit_published
from calibration.regimes import fit_regimes
from calibration.results import FAST_ACCUM_IMPL, Record, Results, bus_factor, load_results
from perfmodel.spec.efficiency import AttentionEfficiency, GemmEfficiency
from perfmodel.spec.errors import InputError
from perfmodel.spec.hardware import load_hardware

DATA = Path(__file__).resolve().parents[1] / "data"
NCCL_SAMPLE = DATA / "nccl" / "all_reduce_perf_sample.txt"
PROFILES = Path(__file__).resolve().parents[2] / "calibration" / "profiles"
MICROBENCHMARKS = default_data_path()
needs_shared = pytest.mark.skipif(not MICROBENCHMARKS.exists(), reason="microbenchmarks.yaml absent")
GiB, MiB = 2**30, 2**20


# ------------------------------------------------------------------------- suite, CPU
@pytest.fixture(scope="module")
def cpu_results_path(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    assert bench_hw_main(["--backend", "numpy", "--quick", "--out", str(out), "--repeats", "3"]) == 0
    (path,) = out.glob("*/results.yaml")
    return path


def test_cpu_suite_writes_a_valid_result_file(cpu_results_path):
    res = load_results(cpu_results_path)
    kinds = {r.kind for r in res.records}
    assert kinds == {"gemm", "attention", "hbm", "elementwise", "launch", "h2d"}
    assert res.metadata.backend == "numpy" and res.metadata.numpy_version
    for r in res.records:
        assert len(r.times_s) == 3 and r.p10_s <= r.median_s <= r.p90_s
        assert r.timing == "host"
    gemm = next(r for r in res.records if r.kind == "gemm")
    assert gemm.derived["flop_per_s"] == pytest.approx(gemm.flop / gemm.median_s)
    assert cpu_results_path.parent.name.endswith(res.metadata.date)


def test_cpu_results_calibrate_to_a_loadable_profile(cpu_results_path, tmp_path, capsys):
    out = tmp_path / "cpu.yaml"
    rc = calibrate_main([str(cpu_results_path), str(NCCL_SAMPLE), "--hardware", "h100-sxm", "-o", str(out),
                         "--peak-tflops", "fp32=1", "--plot", str(tmp_path / "plot.csv")])
    assert rc == 0
    profile = load_profile(out)
    assert "gemm.fp32" in profile.efficiency.sources and "fp32" in profile.efficiency.gemm
    assert profile.efficiency.collectives[0].num_gpus == 8
    assert apply_profile(load_hardware("h100-sxm"), profile).efficiency == profile.efficiency
    assert (tmp_path / "plot.csv").read_text().startswith("group,label")
    assert "accuracy checks" in capsys.readouterr().out


def test_workload_shapes_include_both_backward_gemms():
    shapes = workload_gemm_shapes(("tiny",), (64,), (1,))
    assert (64, 768, 256) in shapes and (64, 256, 768) in shapes and (256, 768, 64) in shapes


def test_torch_cpu_backend_runs_when_installed():
    pytest.importorskip("torch")
    from calibration.bench_torch import TorchBackend

    backend = TorchBackend.create(quick=True, gloo_ranks=2)
    plan = plan_for("cpu", quick=True)
    res = run_suite(backend, plan, log=lambda *_: None)
    ops = {r.op for r in res.records if r.kind == "collective"}
    assert {"all_reduce", "all_gather"} <= ops
    assert any(r.op == "sdpa_bwd" for r in res.records)


def test_fp8_gemms_are_timed_with_both_accumulations_where_the_backend_can():
    import dataclasses

    from calibration.bench import NumpyBackend, _gemm

    @dataclasses.dataclass(frozen=True)
    class Fp8Backend(NumpyBackend):        # numpy stands in for the fp8 kernels
        times_fast_accum = True

        def gemm_precisions(self):
            return ("fp8",)

        def make_gemm(self, m, n, k, precision, fast_accum=False):
            fn, _ = NumpyBackend.make_gemm(self, m, n, k, "fp32")
            return fn, FAST_ACCUM_IMPL if fast_accum else "torch._scaled_mm"

    plan = dataclasses.replace(plan_for("cpu", quick=True), gemm_squares=(32, 64), gemm_models=(), repeats=2,
                               warmup=0, target_sample_s=1e-4)
    recs = _gemm(Fp8Backend(), plan)
    assert sorted((r.shape, r.impl) for r in recs) == sorted(
        ((s, s, s), impl) for s in (32, 64) for impl in ("torch._scaled_mm", FAST_ACCUM_IMPL))
    assert len(_gemm(NumpyBackend(), plan)) == 2     # no fp8: each shape once


# ---------------------------------------------------------------------------- parsers
def test_nccl_sample_parses_sizes_and_busbw():
    res = load_any(NCCL_SAMPLE)
    assert res.metadata.backend == "nccl-tests" and res.metadata.nccl_version == "2.19.3"
    out_of_place = [r for r in res.records if not r.in_place]
    assert len(out_of_place) == 28 and len(res.records) == 56
    assert [r.size_bytes for r in out_of_place] == [8 * 2**i for i in range(28)]
    assert {(r.op, r.num_gpus, r.fabric) for r in res.records} == {("all_reduce", 8, "scale_up")}
    table = {}
    for line in NCCL_SAMPLE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            w = line.split()
            table[int(w[0])] = float(w[7])      # out-of-place busbw, GB/s
    for r in out_of_place:
        if table[r.size_bytes] >= 1.0:
            assert r.derived["busbw_bytes_per_s"] / 1e9 == pytest.approx(table[r.size_bytes], rel=5e-3)


def test_nccl_log_without_rank_lines_infers_group_size_and_op_from_name():
    lines = [ln for ln in NCCL_SAMPLE.read_text().splitlines()
             if "Rank" not in ln and "Collective test starting" not in ln]
    res = parse_nccl_tests("\n".join(lines), origin="logs/node3_all_reduce_perf.log")
    assert res.records[0].num_gpus == 8 and res.records[0].op == "all_reduce"


def test_nccl_log_on_two_hosts_is_scale_out():
    text = NCCL_SAMPLE.read_text().replace("on  synthnode device  4", "on  othernode device  4")
    assert parse_nccl_tests(text).records[0].fabric == "scale_out"


def test_nccl_log_errors_are_one_line():
    with pytest.raises(InputError, match="no nccl-tests table header"):
        parse_nccl_tests("hello\nworld\n")
    text = NCCL_SAMPLE.read_text().replace("# Collective test starting: all_reduce_perf", "")
    with pytest.raises(InputError, match="cannot tell which collective") as exc:
        parse_nccl_tests(text, origin="run.txt")
    assert "\n" not in str(exc.value)


@needs_shared
@pytest.mark.parametrize("hw_id", PUBLISHED_HARDWARE)
def test_microbenchmarks_yaml_parses(hw_id):
    data = yaml.safe_load(MICROBENCHMARKS.read_text())
    pub = parse_microbenchmarks(data, hw_id)
    assert pub.results.records, pub.skipped
    for r in pub.results.records:
        assert r.source.startswith("microbenchmarks.yaml#")


@needs_shared
def test_microbenchmark_busbw_round_trips():
    """Azure H100 all-reduce 1 GiB at 466.35 GB/s busbw (microbenchmarks.yaml nccl_allreduce_8gpu_h100)."""
    data = yaml.safe_load(MICROBENCHMARKS.read_text())
    recs = parse_microbenchmarks(data, "h100-sxm").results.records
    r = next(r for r in recs if r.kind == "collective" and r.size_bytes == GiB and "8gpu_h100 " in r.source)
    assert r.derived["busbw_bytes_per_s"] == pytest.approx(466.35e9)


# ------------------------------------------------------------------ malformed files
GOOD = {"metadata": {"device": "x", "backend": "numpy", "date": "2025-01-01"},
        "records": [{"kind": "launch", "op": "tiny_op", "median_s": 1e-6}]}


@pytest.mark.parametrize("mutate, field", [
    (lambda d: d["records"][0].pop("median_s"), "records.0"),
    (lambda d: d["records"][0].update(medain_s=1.0), "records.0.medain_s"),
    (lambda d: d["records"][0].update(kind="gpu"), "records.0.kind"),
    (lambda d: d["records"][0].update(median_s=-1), "records.0.median_s"),
    (lambda d: d["metadata"].pop("device"), "metadata.device"),
    (lambda d: d.update(records="none"), "records"),
])
def test_malformed_result_files_give_one_line_errors(tmp_path, mutate, field):
    data = yaml.safe_load(yaml.safe_dump(GOOD))
    mutate(data)
    path = tmp_path / "results.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(InputError) as exc:
        load_results(path)
    assert field in str(exc.value) and "\n" not in str(exc.value)


def test_calibrate_cli_reports_bad_input_on_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("records: [1, 2\n")
    assert calibrate_main([str(bad), "--hardware", "h100-sxm", "-o", str(tmp_path / "p.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and err.count("\n") == 1
    assert calibrate_main(["--hardware", "h100-sxm"]) == 2
    assert bench_hw_main(["--backend", "cuda-magic"]) == 2


# ------------------------------------------------------------ fits recover parameters
RNG = np.random.default_rng(7)


def _noisy(x, rel=0.02):
    return x * (1 + rel * RNG.standard_normal(np.shape(x)))


def _collective_records(sizes, times, n=8, op="all_reduce"):
    return [Record(kind="collective", op=op, size_bytes=int(s), num_gpus=n, fabric="scale_up", median_s=float(t))
            for s, t in zip(sizes, times)]


def test_collective_fit_recovers_latency_and_busbw():
    alpha, busbw, n = 25e-6, 420e9, 8
    S = np.array([8 * 2.0**i for i in range(31)])            # 8 B .. 8 GiB
    t = _noisy(alpha + bus_factor("all_reduce", n) * S / busbw)
    fits, group = fit_collective_group(_collective_records(S, t), "all_reduce", "scale_up", n,
                                       min_bytes=0, max_regimes=1, tolerance=0.1)
    (fit,) = fits
    assert fit.latency_s == pytest.approx(alpha, rel=0.03)
    assert fit.busbw_bytes_per_s == pytest.approx(busbw, rel=0.03)
    assert group.max_abs_error < 0.08


def test_two_regime_envelope_is_recovered():
    """Lower envelope of a low-latency and a high-bandwidth line (LL vs Simple protocols)."""
    S = np.array([2.0**i for i in range(10, 34)])
    lines = [(10e-6, 1 / 100e9), (60e-6, 1 / 450e9)]
    t = np.min([a + c * S for a, c in lines], axis=0)
    got = fit_regimes(S, t, max_regimes=3, tolerance=0.01)
    assert len(got) == 2
    assert got[0].latency_s == pytest.approx(10e-6, rel=0.05)
    assert 1 / got[1].slope_s_per_byte == pytest.approx(450e9, rel=0.02)


def test_gemm_fit_recovers_eff_max_half_dim_and_kernel_overhead():
    e, d, t0, peak = 0.72, 180.0, 6e-6, 989e12
    dims = [256, 512, 1024, 2048, 4096, 8192]
    recs = []
    for m in dims:
        for n, k in ((4096, 4096), (m, m), (1024, 8192)):
            eff = e * m / (m + d) * n / (n + d) * k / (k + d)
            flop = 2.0 * m * n * k
            recs.append(Record(kind="gemm", op="matmul", precision="bf16", shape=(m, n, k), flop=flop,
                               median_s=float(_noisy(t0 + flop / (eff * peak), 0.01))))
    fitted, t0_fit, group = fit_gemm(recs, peak, GemmEfficiency(efficiency_max=0.5, half_dim=64), "gemm.bf16", 1e-6)
    assert fitted.efficiency_max == pytest.approx(e, rel=0.02)
    assert fitted.half_dim == pytest.approx(d, rel=0.05)
    assert t0_fit == pytest.approx(t0, rel=0.10)
    assert group.max_abs_error < 0.04


def test_grouped_records_are_checked_against_the_dense_curve_not_fitted():
    """Expert GEMMs timed at the step model's own time (per-expert kernel overhead + dense bf16
    curve) give a check of zero error and no params; 10% slower records give +10% errors."""
    from calibration.fit_forms import check_grouped_gemm
    from perfmodel.formulas.compute import gemm_time_s

    spec = load_hardware("h100-sxm")
    eff = spec.efficiency
    recs = []
    for groups, n, k in ((16, 1536, 2048), (8, 28672, 4096)):
        for m in (128, 512, 2048, 8192):
            t = float(gemm_time_s(m, n, k, groups, "bf16", spec, eff))
            recs.append(Record(kind="gemm", op="grouped_mm", precision="bf16", shape=(m, n, k), groups=groups,
                               flop=2.0 * m * n * k * groups, median_s=t))
    group = check_grouped_gemm(recs, spec, eff)
    assert group.params == {} and len(group.points) == 8 and group.max_abs_error < 1e-9
    slow = [r.model_copy(update={"median_s": r.median_s * 1.1}) for r in recs]
    assert all(p.rel_error == pytest.approx(1 / 1.1 - 1) for p in check_grouped_gemm(slow, spec, eff).points)


def _att(op, s, eff, causal, impl, peak=989e12, flop=1e12):
    return Record(kind="attention", op=op, shape=(1, 32, s, 128), flop=flop, causal=causal, impl=impl,
                  precision="bf16", median_s=flop / (peak * eff))


def test_several_attention_kernels_need_a_choice():
    spec = load_hardware("h100-sxm")
    recs = [_att(op, s, e, True, impl) for impl, e in (("sdpa-flash", 0.3), ("sdpa-cudnn", 0.5))
            for op in ("sdpa_fwd", "sdpa_bwd") for s in (1024, 8192)]
    res = Results(metadata={"device": "x", "backend": "test", "date": "d"}, records=tuple(recs))
    with pytest.raises(InputError, match="--attention-impl.*sdpa-cudnn, sdpa-flash"):
        fit_efficiencies([res], spec)
    with pytest.raises(InputError, match="no attention records of 'fa3'"):
        fit_efficiencies([res], spec, attention_impl="fa3")
    att = fit_efficiencies([res], spec, attention_impl="sdpa-cudnn").efficiencies.attention
    assert att.fwd_efficiency_max > 0.45       # from the 0.5 kernel only, not a blend with 0.3


def test_attention_fit_uses_causal_records_when_both_exist():
    spec = load_hardware("h100-sxm")
    # causal at a constant 0.40 (any half_seq fits, eff_max -> 0.40 as half_seq -> 0); the
    # non-causal records at 0.70 would pull a blended fit far above it
    recs = [_att(op, s, 0.70 if not causal else 0.40, causal, "k")
            for causal in (True, False) for op in ("sdpa_fwd", "sdpa_bwd") for s in (1024, 4096, 16384)]
    res = Results(metadata={"device": "x", "backend": "test", "date": "d"}, records=tuple(recs))
    cal = fit_efficiencies([res], spec)
    att = cal.efficiencies.attention
    eff_16k = att.fwd_efficiency_max * 16384 / (16384 + att.half_seq)
    assert eff_16k == pytest.approx(0.40, rel=0.02)
    assert "causal records only" in cal.efficiencies.sources["attention"]


def test_skipped_groups_keep_spec_values_and_say_why():
    spec = load_hardware("h100-sxm")
    recs = [Record(kind="gemm", op="matmul", precision="bf16", shape=(s, s, s), flop=2.0 * s**3,
                   median_s=2.0 * s**3 / (989e12 * 0.5)) for s in (1024, 2048, 4096, 8192)]
    res = Results(metadata={"device": "x", "backend": "test", "date": "d"}, records=tuple(recs))
    assert fit_efficiencies([res], spec).efficiencies.gemm["bf16"] != spec.efficiency.gemm["bf16"]
    eff = fit_efficiencies([res], spec, skip=("gemm",)).efficiencies
    assert eff.gemm == spec.efficiency.gemm
    assert "--skip gemm" in eff.sources["gemm"] and "--skip gemm" in eff.sources["kernel_overhead_s"]
    with pytest.raises(InputError, match="--skip: unknown group 'gemms'"):
        fit_efficiencies([res], spec, skip=("gemms",))


def _fp8_records(sizes, eff, impl):
    return [Record(kind="gemm", op="matmul", precision="fp8", shape=(s, s, s), flop=2.0 * s**3, impl=impl,
                   median_s=2.0 * s**3 / (1978.9e12 * eff)) for s in sizes]


def test_fast_accumulation_speedup_is_the_median_ratio_of_the_same_shapes():
    spec = load_hardware("h100-sxm")
    sizes = (512, 2048, 4096, 8192, 16384)
    precise = _fp8_records(sizes, 0.60, "torch._scaled_mm")
    # 1.15x on every shape of >= 1 GFLOP; the 512^3 call (0.27 GFLOP) is no faster and not counted
    fast = _fp8_records(sizes[1:], 0.60 * 1.15, FAST_ACCUM_IMPL) + _fp8_records(sizes[:1], 0.60, FAST_ACCUM_IMPL)
    res = Results(metadata={"device": "x", "backend": "test", "date": "d"}, records=tuple(precise + fast))
    cal = fit_efficiencies([res], spec)
    assert cal.efficiencies.fp8_fast_accum_speedup == pytest.approx(1.15)
    # the fp8 GEMM fit sees only the precise records: the shared efficiency of the sweep
    assert cal.efficiencies.gemm["fp8"].efficiency_max == pytest.approx(0.60, rel=0.05)
    group = next(g for g in cal.groups if g.group == "gemm_fast_accum.fp8")
    assert sum(p.in_fit for p in group.points) == 4 and "median over shapes" in cal.efficiencies.sources[
        "fp8_fast_accum_speedup"]
    # without fast-accumulation records the spec's value stays, with the spec's source
    alone = fit_efficiencies([Results(metadata=res.metadata, records=tuple(precise))], spec).efficiencies
    assert alone.fp8_fast_accum_speedup == spec.efficiency.fp8_fast_accum_speedup
    assert alone.sources["fp8_fast_accum_speedup"].startswith("spec default (h100-sxm)")


def _attention_records(e_f, e_b, half_f, half_b, fwd_lengths, bwd_lengths, peak=989e12):
    recs, flop = [], 1e12
    for op, e, half, lengths in (("sdpa_fwd", e_f, half_f, fwd_lengths), ("sdpa_bwd", e_b, half_b, bwd_lengths)):
        for s in lengths:
            recs.append(Record(kind="attention", op=op, shape=(1, 32, s, 128), flop=flop,
                               median_s=float(_noisy(flop / (peak * e * s / (s + half)), 0.01))))
    return recs


ATT_DEFAULT = AttentionEfficiency(fwd_efficiency_max=0.3, bwd_efficiency_max=0.3, half_seq=512)
ATT_LENGTHS = (512, 1024, 2048, 4096, 8192, 16384)


def test_attention_fit_recovers_each_pass_with_its_own_half_seq():
    # the forward saturates early, the backward late, as FlashAttention-2 on the H100 suite
    recs = _attention_records(0.35, 0.33, 370.0, 990.0, ATT_LENGTHS, ATT_LENGTHS)
    fitted, group = fit_attention(recs, 989e12, ATT_DEFAULT)
    assert fitted.fwd_efficiency_max == pytest.approx(0.35, rel=0.03)
    assert fitted.bwd_efficiency_max == pytest.approx(0.33, rel=0.03)
    assert fitted.half_seq == pytest.approx(370.0, rel=0.1)
    assert fitted.bwd_half_seq == pytest.approx(990.0, rel=0.1)
    assert fitted.backward_half_seq == fitted.bwd_half_seq and "bwd_half_seq" in group.params
    # each pass is its own chart series, its points labelled with their own op
    series: dict[str, set[str]] = {}
    for p in group.points:
        series.setdefault(p.group, set()).add(p.label.split()[0])
    assert series == {"attention.fwd": {"sdpa_fwd"}, "attention.bwd": {"sdpa_bwd"}}


def test_attention_fit_shares_half_seq_when_a_pass_has_one_length():
    # backward timed at one length only: one knee for both passes, fitted to the forward's lengths
    recs = _attention_records(0.55, 0.42, 700.0, 700.0, ATT_LENGTHS, (8192,))
    fitted, group = fit_attention(recs, 989e12, ATT_DEFAULT)
    assert fitted.bwd_half_seq is None and fitted.backward_half_seq == fitted.half_seq
    assert fitted.half_seq == pytest.approx(700.0, rel=0.1)
    assert fitted.bwd_efficiency_max == pytest.approx(0.42, rel=0.03)
    assert "bwd_half_seq" not in group.params


def test_attention_fit_states_the_head_dim_its_records_ran_at():
    """The fitted curve's measured_head_dim is the records' (shape[3]) where they agree on one, else
    the spec's; its generation is the spec's (perfmodel.spec.attention_head_dim)."""
    spec_basis = ATT_DEFAULT.model_copy(update={"measured_head_dim": 64, "measured_generation": "hopper"})
    fitted, _ = fit_attention(_attention_records(0.35, 0.33, 370.0, 990.0, ATT_LENGTHS, ATT_LENGTHS), 989e12,
                              spec_basis)
    assert (fitted.measured_head_dim, fitted.measured_generation) == (128, "hopper")
    published = [Record(kind="attention", op="sdpa_fwd", seq_len=8192, rate_per_s=180e12)]
    fitted, _ = fit_attention(published, 312e12, spec_basis)
    assert (fitted.measured_head_dim, fitted.measured_generation) == (64, "hopper")


def test_memory_and_launch_fits():
    bw, eff = 3.35e12, 0.88
    recs = [Record(kind="hbm", op=op, size_bytes=b, median_s=b / (bw * eff))
            for op in ("copy", "triad") for b in (2**28, 2**30)]
    assert fit_memory(recs, bw)[0] == pytest.approx(eff, rel=1e-6)
    launches = [Record(kind="launch", op="tiny_op", median_s=t) for t in (4e-6, 5e-6)]
    c, _ = fit_launch(launches)
    assert 4e-6 < c < 5e-6


def test_groups_without_records_keep_spec_defaults():
    spec = load_hardware("h100-sxm")
    res = Results(metadata={"device": "x", "backend": "test", "date": "d"},
                  records=(Record(kind="launch", op="tiny_op", median_s=3e-6),
                           Record(kind="launch", op="launch", median_s=2e-6)))
    cal = fit_efficiencies([res], spec)
    eff = cal.efficiencies
    assert eff.host_op_overhead_s == pytest.approx(3e-6)     # the suite's eager op
    assert eff.launch_overhead_s == pytest.approx(2e-6)      # a raw launch
    assert eff.gemm == spec.efficiency.gemm and eff.attention == spec.efficiency.attention
    assert eff.sources["memory_efficiency"].startswith("spec default")


def test_profile_round_trip(tmp_path):
    spec = load_hardware("h100-sxm")
    path = write_profile(tmp_path / "p.yaml", spec.id, spec.efficiency, {"note": "test"})
    prof = load_profile(path)
    assert prof.hardware_id == "h100-sxm" and prof.efficiency.sources["note"] == "test"
    path.write_text(path.read_text().replace("memory_efficiency:", "memory_efficency:"))
    with pytest.raises(InputError, match="memory_efficency"):
        load_profile(path)


# ------------------------------------------------------------ the published profiles
@needs_shared
def test_fit_published_accuracy(tmp_path, capsys):
    """Must-show figures, printed (run pytest -s to see them); thresholds as reported in
    docs/calibration.md, not the targets the single form misses."""
    fits = {f.hardware_id: f for f in fit_published(MICROBENCHMARKS, out_dir=tmp_path)}
    for hw_id, f in fits.items():
        for c in accuracy_checks(f.calibration):
            if c.num_points:
                print(f"{hw_id:14} {c.name:26} {c.num_within}/{c.num_points} within {c.tolerance:.0%}, "
                      f"worst {c.worst.rel_error:+.1%} ({c.worst.label})")
    checks = {(h, c.name): c for h, f in fits.items() for c in accuracy_checks(f.calibration)}
    # 3 suite copies per run (plus the published point): three runs on the H100, one on the H200
    for hw_id, points in (("h100-sxm", 10), ("h200-sxm", 4), ("a100-sxm-80gb", 1)):
        hbm = checks[(hw_id, "HBM copies")]
        assert hbm.num_within == hbm.num_points == points
    for hw_id in ("h200-sxm", "a100-sxm-80gb", "gb200-nvl72"):
        coll = checks[(hw_id, "collectives 1 MiB..8 GiB")]
        assert coll.num_within == coll.num_points > 0
    assert isinstance(fits["b200"].calibration, Calibration)


@needs_shared
def test_measured_runs_enter_their_profiles_with_their_choices(tmp_path):
    """The committed H100 runs (2026-11-22; 2026-11-27 with the attention to 128k tokens, the
    GEMM and attention groups again on another machine, and the whole suite on a fourth): the
    flash attention kernel is fitted,
    the expert GEMMs are checked, fast accumulation is fitted from the runs that timed it, and
    --published-only gives the published fit alone."""
    both = fit_published(MICROBENCHMARKS, hardware_ids=("h100-sxm",), out_dir=tmp_path)[0].calibration
    alone = fit_published(MICROBENCHMARKS, hardware_ids=("h100-sxm",), out_dir=None, measured={})[0].calibration
    spec = load_hardware("h100-sxm")
    def bf16_points(cal):
        return sum(len(g.points) for g in cal.groups if g.group == "gemm.bf16")

    assert bf16_points(both) == bf16_points(alone) + 4 * 131       # each run's 131 bf16 shapes
    grouped = next(g for g in both.groups if g.group == "grouped_gemm")
    assert grouped.params == {} and len(grouped.points) == 3 * 24    # checked, not fitted
    assert spec.efficiency.gemm["bf16"] is not None
    att = next(g for g in both.groups if g.group == "attention")
    # causal fwd + bwd: 6 lengths in each of four runs, 3 more (32k-128k) in the long-attention file
    assert all("sdpa" in p.label for p in att.points) and len(att.points) == 4 * 6 * 2 + 3 * 2
    fast = next(g for g in both.groups if g.group == "gemm_fast_accum.fp8")
    assert {p.source for p in fast.points} == {"calibration/results/nvidia-h100-80gb-hbm3-2026-11-27/results.yaml",
                                               "calibration/results/nvidia-h100-80gb-hbm3-2026-11-27/clocked_gemm.yaml",
                                               "calibration/results/nvidia-h100-80gb-hbm3-2026-11-27-moe/results.yaml"}
    # the in-step clock ratio is no fit of the suite's records: the profile keeps the spec's measured value
    assert both.efficiencies.attention_clock_ratio == spec.efficiency.attention_clock_ratio
    assert both.efficiencies.fp8_fast_accum_speedup == pytest.approx(
        load_profile(PROFILES / "h100-sxm.yaml").efficiency.fp8_fast_accum_speedup, rel=1e-4)
    assert "sdpa-flash" not in str(alone.efficiencies.sources.get("attention", ""))
    committed = load_profile(PROFILES / "h100-sxm.yaml").efficiency
    assert committed.gemm["bf16"].efficiency_max == pytest.approx(both.efficiencies.gemm["bf16"].efficiency_max,
                                                                  rel=1e-4)
    # the cuDNN records, never mixed with the flash ones, are fitted on their own as attention_cudnn
    cudnn = next(g for g in both.groups if g.group == "attention_cudnn")
    assert all("sdpa_" in p.label for p in cudnn.points) and len(cudnn.points) == len(att.points)
    assert {p.source for p in cudnn.points} == {p.source for p in att.points}
    assert both.efficiencies.attention_cudnn.fwd_efficiency_max > 1.5 * both.efficiencies.attention.fwd_efficiency_max
    assert committed.attention_cudnn.fwd_efficiency_max == pytest.approx(
        both.efficiencies.attention_cudnn.fwd_efficiency_max, rel=1e-4)
    assert alone.efficiencies.attention_cudnn is None      # no lent run, no cuDNN curve


def test_same_die_borrowing_scales_by_the_measured_best_fractions():
    """GB200 takes B200's fitted curve, scaled by the MAMF fractions in the two specs
    (by hand: 0.73 / 0.78 for BF16, 0.72 / 0.76 for FP8); the shape is kept."""
    donor = {"bf16": GemmEfficiency(efficiency_max=0.6, half_dim=50.0),
             "fp8": GemmEfficiency(efficiency_max=0.5, half_dim=150.0)}
    out = borrowed_gemm(donor, load_hardware("b200"), load_hardware("gb200-nvl72"))
    assert out["bf16"].efficiency_max == pytest.approx(0.6 * 0.73 / 0.78)
    assert out["fp8"].efficiency_max == pytest.approx(0.5 * 0.72 / 0.76)
    assert out["bf16"].half_dim == 50.0 and out["fp8"].half_dim == 150.0
    # Same system on both sides: nothing changes.
    same = borrowed_gemm(donor, load_hardware("b200"), load_hardware("b200"))
    assert same["bf16"].efficiency_max == pytest.approx(0.6)


@needs_shared
def test_committed_gb200_profile_is_the_borrowed_b200_fit(tmp_path):
    fits = {f.hardware_id: f for f in fit_published(MICROBENCHMARKS, hardware_ids=("gb200-nvl72",), out_dir=tmp_path)}
    fresh = fits["gb200-nvl72"].calibration.efficiencies.gemm
    committed = load_profile(PROFILES / "gb200-nvl72.yaml").efficiency.gemm
    for p in ("bf16", "fp8"):
        assert committed[p].efficiency_max == pytest.approx(fresh[p].efficiency_max, rel=1e-4)


@needs_shared
def test_calibrate_accepts_the_microbenchmarks_file(tmp_path):
    out = tmp_path / "h200.yaml"
    assert calibrate_main([str(MICROBENCHMARKS), "--hardware", "h200-sxm", "-o", str(out)]) == 0
    assert load_profile(out).efficiency.memory_efficiency == pytest.approx(0.85, abs=0.01)


@pytest.mark.parametrize("path", sorted(PROFILES.glob("*.yaml")), ids=lambda p: p.stem)
def test_committed_profiles_load(path):
    prof = load_profile(path)
    assert prof.hardware_id == path.stem
    apply_profile(load_hardware(prof.hardware_id), prof)


def test_published_grouped_rates_bound_the_dense_curve_from_above():
    """calibration/data/grouped_gemm.yaml times a per-expert loop issued by the host and a whole
    MoE forward: both take longer than the step model's expert GEMMs on the dense curve
    (measured/model >= 1); the per-expert loop (128 experts of 512 tokens, 129.5 TFLOP/s) runs at
    well under half the rate the H100 suite measured for expert GEMMs issued from a CUDA graph."""
    from calibration.grouped import check_published

    checks = {c.id: c for c in check_published(load_hardware("h100-sxm"))}
    assert len(checks) == 2 and all(c.ratio >= 1.0 for c in checks.values())
    assert checks["grouped_gemm_h100_qwen3_30b_up_tgale96_pr37"].ratio > 2.0


# ------------------------------------------------------------------ issue 31: no input escapes
def _one_line_error(capsys, code) -> str:
    """``perfmodel calibrate`` exited 2 with exactly one line on stderr, and no traceback."""
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err and "internal error" not in err, err
    assert err.startswith("perfmodel: error:"), err
    return err


def test_a_huge_log_is_refused_before_it_is_read(tmp_path, capsys):
    """A 112 MB nccl-tests log ran out of memory; the stat says 'too large' first (a sparse file)."""
    import time

    from perfmodel.cli import main

    log = tmp_path / "all_reduce_perf.txt"
    with open(log, "wb") as fh:
        fh.truncate(112 * 2**20)
    t0 = time.perf_counter()
    err = _one_line_error(capsys, main(["calibrate", str(log), "--hardware", "h100-sxm", "-o",
                                        str(tmp_path / "p.yaml")]))
    assert "too large" in err and time.perf_counter() - t0 < 5.0
    assert not (tmp_path / "p.yaml").exists()


def test_nan_in_an_nccl_tests_log_is_one_line(tmp_path, capsys):
    from perfmodel.cli import main

    lines = NCCL_SAMPLE.read_text().splitlines()
    row = next(i for i, line in enumerate(lines) if line.strip().startswith("1048576 "))
    words = lines[row].split()
    words[5] = "nan"
    lines[row] = "  ".join(words)
    log = tmp_path / "all_reduce_perf.txt"
    log.write_text("\n".join(lines) + "\n")
    err = _one_line_error(capsys, main(["calibrate", str(log), "--hardware", "h100-sxm", "-o",
                                        str(tmp_path / "p.yaml")]))
    assert "finite" in err


def test_a_binary_results_file_is_one_line(tmp_path, capsys):
    from perfmodel.cli import main

    results = tmp_path / "results.yaml"
    results.write_bytes(bytes(range(256)) * 10)
    _one_line_error(capsys, main(["calibrate", str(results), "--hardware", "h100-sxm", "-o",
                                  str(tmp_path / "p.yaml")]))


@pytest.mark.parametrize("target", ["directory", "/dev/full", "own input"])
def test_calibrate_output_that_cannot_be_written(tmp_path, capsys, target):
    """calibrate -o onto a directory, onto /dev/full or onto its own input: a traceback (exit 1),
    and the last one overwrote the log it was fitting."""
    from perfmodel.cli import main

    log = tmp_path / "all_reduce_perf.txt"
    log.write_text(NCCL_SAMPLE.read_text())
    if target == "/dev/full" and not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    out = {"directory": str(tmp_path), "/dev/full": "/dev/full", "own input": str(log)}[target]
    err = _one_line_error(capsys, main(["calibrate", str(log), "--hardware", "h100-sxm", "-o", out]))
    assert "--output" in err
    assert log.read_text() == NCCL_SAMPLE.read_text()


def test_python_m_calibration_errors_stay_one_line(tmp_path, capsys):
    """``python -m calibration calibrate`` keeps its own prefix, and a file it cannot write is one line."""
    log = tmp_path / "all_reduce_perf.txt"
    log.write_text(NCCL_SAMPLE.read_text())
    assert calibrate_main([str(log), "--hardware", "h100-sxm", "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --output:") and err.count("\n") == 1


# ------------------------------------------------------- issue 37: calibration that reads any cluster
def _two_node_profile(tmp_path, latency_s=50e-6, busbw=300e9):
    """A 16-GPU log over two 8-GPU hosts (synthetic, tests/support/nccl_logs.py) fitted into a profile."""
    from support.nccl_logs import synthetic_log

    from perfmodel.cli import main
    log = tmp_path / "all_reduce_perf_2x8.txt"
    log.write_text(synthetic_log("all_reduce", 16, 2, latency_s, busbw))
    out = tmp_path / "mine.yaml"
    # options first, the positional last: the order the option-order bug refused
    assert main(["calibrate", "--hardware", "h100-sxm", "-o", str(out), str(log)]) == 0
    return load_profile(out)


def test_a_16_gpu_two_node_log_fits_the_16_gpu_group_it_measured(tmp_path, capsys):
    """The log's fit is keyed by its group: all-reduce over 16 GPUs in 2 domains. It replaces the
    time of a 16-GPU data-parallel group of two H100 nodes, t = 50 us + 2 * 15/16 * S / 300 GB/s,
    and not that of the 128-GPU group of 16 nodes (the bug: the fit was keyed by the number of
    domains, 16, so it landed on 128 GPUs and missed the 16 it measured)."""
    from perfmodel.formulas.comm import Collective, group_time_s

    prof = _two_node_profile(tmp_path)
    (fit,) = prof.efficiency.collectives
    assert (fit.op, fit.fabric, fit.num_gpus, fit.num_domains) == ("all_reduce", "scale_out", 16, 2)
    assert fit.latency_s == pytest.approx(50e-6, rel=1e-3) and fit.busbw_bytes_per_s == pytest.approx(300e9, rel=1e-3)
    hw = apply_profile(load_hardware("h100-sxm"), prof)
    S = 1e9
    assert float(group_time_s(Collective.ALL_REDUCE, S, 16, 1, hw, hw.efficiency)) == pytest.approx(
        fit.latency_s + 2 * 15 / 16 * S / fit.busbw_bytes_per_s, rel=1e-12)
    unfitted = hw.efficiency.model_copy(update={"collectives": ()})
    for n, stride in ((128, 1), (16, 8)):      # 16 domains; and 16 GPUs one per node (16 domains)
        assert float(group_time_s(Collective.ALL_REDUCE, S, n, stride, hw, hw.efficiency)) == float(
            group_time_s(Collective.ALL_REDUCE, S, n, stride, hw, unfitted))


def test_a_two_node_curve_sets_the_nic_efficiency_for_every_other_group(tmp_path):
    """What the 16-GPU curve says about the network reaches other groups through
    scale_out_bus_efficiency. By hand: two domains of 8 H100, all-reduce as a tree (or NVLS-tree)
    sends S once each way through the 8 NICs of a node, S / (8 * 50 GB/s * e); NVLink's share,
    2 * 7/8 * S / (369 GB/s * 480/370) = S / 273.5 GB/s, is faster than the measured algbw of
    300 / (2 * 15/16) = 160 GB/s, so the NICs set it: e = 160 / 400 = 0.4."""
    prof = _two_node_profile(tmp_path)
    assert prof.efficiency.scale_out_bus_efficiency == pytest.approx(0.4, rel=2e-3)
    assert "16 GPUs in 2 domains" in prof.efficiency.sources["scale_out_bus_efficiency"]


def test_an_nvlink_bound_two_node_curve_leaves_the_nic_efficiency_alone(tmp_path):
    """At 600 GB/s busbw (algbw 320 GB/s) the model's NVLink share (273.5 GB/s) could not keep up
    whatever the NICs did: the curve does not measure them, and the spec's value stays."""
    prof = _two_node_profile(tmp_path, busbw=600e9)
    spec = load_hardware("h100-sxm")
    assert prof.efficiency.scale_out_bus_efficiency == spec.efficiency.scale_out_bus_efficiency
    assert "NVLink-bound" in prof.efficiency.sources["scale_out_bus_efficiency"]


def test_predict_with_a_fitted_profile_uses_it(tmp_path, capsys):
    """``perfmodel predict --profile PATH``: 16 H100 in pure data parallelism (ZeRO 0, no DP
    overlap, fp32 gradients) all-reduce 4 bytes per parameter once per step over the 16-GPU,
    2-node group the profile measured, so dp_comm = latency + 2 * 15/16 * 4 P / busbw with the
    profile's fitted values, P = 8,030,261,248 (Llama 3 8B)."""
    import json

    from perfmodel.cli import main
    prof = _two_node_profile(tmp_path)
    (fit,) = prof.efficiency.collectives
    scenario = tmp_path / "dp16.yaml"
    scenario.write_text(yaml.safe_dump({
        "name": "dp16", "hardware": "h100-sxm", "num_gpus": 16, "model": "llama3-8b", "seq_length": 4096,
        "global_batch_size": 16, "micro_batch_size": 1, "parallelism": {"tp": 1, "pp": 1, "zero_stage": 0},
        "software": {"overlap": {"dp": 0.0}, "grad_reduce_in_fp32": True}}))
    capsys.readouterr()
    dp = {}
    for choice in (str(tmp_path / "mine.yaml"), "none"):
        assert main(["predict", str(scenario), "--profile", choice, "--format", "json"]) == 0
        out = json.loads(capsys.readouterr().out)
        dp[choice] = out["breakdown_s"]["dp_comm"]
        assert out["model_params_total"] == 8_030_261_248
    want = fit.latency_s + 2 * 15 / 16 * 4 * 8_030_261_248 / fit.busbw_bytes_per_s
    assert dp[str(tmp_path / "mine.yaml")] == pytest.approx(want, rel=1e-9)
    assert dp["none"] != pytest.approx(want, rel=0.05)


@pytest.mark.parametrize("argv, fragment", [
    (["bench-hw", "--repeats", "0", "--backend", "numpy"], "--repeats"),
    (["calibrate", "--max-regimes", "9", "--hardware", "h100-sxm", "-o", "p.yaml", "x.txt"], "--max-regimes"),
])
def test_options_placed_first_reach_the_command(argv, fragment, capsys):
    """The option-order bug: ``perfmodel bench-hw --quick`` and ``perfmodel calibrate --flag ...``
    were refused by perfmodel's own parser ('unrecognized arguments'). Each command now parses
    its own argv: a bad value placed first is that command's one-line error about that option."""
    from perfmodel.cli import main
    err = _one_line_error(capsys, main(argv))
    assert fragment in err and "unrecognized" not in err


def test_bench_hw_quick_runs_with_its_options_first(tmp_path, capsys):
    from perfmodel.cli import main
    assert main(["bench-hw", "--quick", "--backend", "numpy", "--repeats", "1", "--out", str(tmp_path)]) == 0
    (path,) = tmp_path.glob("*/results.yaml")
    assert load_results(path).records


def test_bench_hw_runs_only_the_groups_asked_for_at_the_lengths_asked_for(tmp_path, capsys):
    """--only, --attention-seqs and --warmup: the attention group alone, at the two lengths
    given, one record per length (numpy times the forward of non-causal attention alone)."""
    assert bench_hw_main(["--backend", "numpy", "--quick", "--only", "attention", "--attention-seqs", "48,96",
                          "--warmup", "0", "--repeats", "2", "--out", str(tmp_path)]) == 0
    (path,) = tmp_path.glob("*/results.yaml")
    records = load_results(path).records
    assert {r.kind for r in records} == {"attention"}
    assert sorted(r.shape[2] for r in records) == [48, 96]
    assert all(len(r.times_s) == 2 for r in records)
    assert "(attention)" in capsys.readouterr().out


@pytest.mark.parametrize("argv,fragment", [
    (["--only", "gemm,nope"], "unknown group 'nope'"),
    (["--only", ","], "--only"),
    (["--attention-seqs", "0"], "1 to 1048576"),
    (["--attention-seqs", "2097152"], "1 to 1048576"),
    (["--attention-seqs", "1k"], "expected an integer"),
    (["--attention-seqs", ",".join(["64"] * 17)], "at most 16"),
    (["--warmup", "-1"], "--warmup"),
])
def test_bench_hw_option_errors_are_one_line(argv, fragment, capsys):
    from perfmodel.cli import main
    assert fragment in _one_line_error(capsys, main(["bench-hw", "--backend", "numpy", "--quick", *argv]))


def test_bench_hw_says_so_when_the_machine_runs_out_of_memory(tmp_path, capsys, monkeypatch):
    from calibration import cli

    def no_memory(*args, **kwargs):
        raise MemoryError
    monkeypatch.setattr(cli, "run_and_write", no_memory)
    from perfmodel.cli import main
    assert "more memory" in _one_line_error(capsys, main(["bench-hw", "--backend", "numpy", "--quick",
                                                          "--out", str(tmp_path)]))


def test_fast_accumulation_pairs_shapes_within_one_run():
    """Two runs of the suite fitted together: each fast record is set against the precise one of
    its own run (by hand: run a 1.10x, run b 1.02x; the median of the two pairs is 1.06x)."""
    from calibration.fit_forms import fit_fast_accum
    from calibration.results import Record

    def rec(source, t, impl):
        return Record(kind="gemm", op="matmul", precision="fp8", shape=(8192, 8192, 8192), flop=2 * 8192**3,
                      impl=impl, timing="cuda-graph", times_s=(t,), median_s=t, p10_s=t, p90_s=t, source=source)
    precise = [rec("a", 1.10, "torch._scaled_mm"), rec("b", 1.02, "torch._scaled_mm")]
    fast = [rec("a", 1.0, "torch._scaled_mm fast_accum"), rec("b", 1.0, "torch._scaled_mm fast_accum")]
    speedup, group = fit_fast_accum(fast, precise)
    assert speedup == pytest.approx(1.06)
    assert len(group.points) == 2
