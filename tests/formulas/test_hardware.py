"""Hardware specs: every YAML loads, every number is sourced, and the numbers match their sources.

Anchor values are REFERENCES.md 'Dense peaks' and the vendors' NVLink / Infinity Fabric
figures (which count both directions).
"""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import pytest
import yaml

from perfmodel.formulas.compute import GEMM_CURVES
from perfmodel.spec.efficiency import Efficiencies
from perfmodel.spec.errors import InputError
from perfmodel.spec.hardware import (
    HARDWARE_DIR,
    PRECISIONS,
    list_hardware_ids,
    load_hardware,
    load_hardware_file,
    parse_hardware,
)
from perfmodel.spec.units import BITS_PER_BYTE, GIGA, TERA

ALL_IDS = list_hardware_ids()

REQUIRED_IDS = (
    "a100-sxm-80gb",
    "a100-sxm-40gb",
    "h100-sxm",
    "h200-sxm",
    "h800-sxm",
    "b200",
    "gb200-nvl72",
)

# REFERENCES.md 'FLOPs and MFU' -> 'Dense peaks' (TFLOP/s). GB200 uses the datasheet
# figures, not the 2450/4900/9800 of NVIDIA's MFU tables.
REFERENCE_DENSE_PEAKS = [
    ("a100-sxm-80gb", "bf16", 312),
    ("a100-sxm-40gb", "bf16", 312),
    ("h100-sxm", "bf16", 989),
    ("h100-sxm", "fp8", 1979),
    ("h200-sxm", "bf16", 989),
    ("h200-sxm", "fp8", 1979),
    ("h800-sxm", "bf16", 989),
    ("h800-sxm", "fp8", 1979),
    ("b200", "bf16", 2250),
    ("b200", "fp8", 4500),
    ("b200", "fp4", 9000),
    ("gb200-nvl72", "bf16", 2500),
    ("gb200-nvl72", "fp8", 5000),
    ("gb200-nvl72", "fp4", 10000),
]

# Vendor scale-up figures per GPU, both directions added (GB/s).
DATASHEET_BIDIRECTIONAL_GB_PER_S = [
    ("a100-sxm-80gb", 600),   # NVLink 3, 12 links
    ("a100-sxm-40gb", 600),
    ("h100-sxm", 900),        # NVLink 4, 18 links
    ("h200-sxm", 900),
    ("h800-sxm", 400),        # NVLink cut on the export part
    ("b200", 1800),           # NVLink 5, 18 links
    ("gb200-nvl72", 1800),
    ("b300", 1800),
    ("gb300-nvl72", 1800),
    ("mi300x", 896),          # Infinity Fabric, 7 x 128
    ("mi355x", 1075.2),       # Infinity Fabric, 7 x 153.6
]

NO_FP4 = ["a100-sxm-80gb", "a100-sxm-40gb", "h100-sxm", "h100-sxm-hbm2e-500w", "h200-sxm", "h800-sxm", "mi300x"]
NO_FP8 = ["a100-sxm-80gb", "a100-sxm-40gb"]
NVLS_SYSTEMS = ["h100-sxm", "h100-sxm-hbm2e-500w", "h200-sxm", "h800-sxm", "b200", "gb200-nvl72", "b300", "gb300-nvl72"]
NO_IN_NETWORK_REDUCTION = ["a100-sxm-80gb", "a100-sxm-40gb", "mi300x", "mi355x"]


def _raw(hw_id: str) -> dict:
    return yaml.safe_load((HARDWARE_DIR / f"{hw_id}.yaml").read_text())


def _present(ids):
    return [i for i in ids if i in ALL_IDS]


# --- loading ---------------------------------------------------------------------------


def test_required_systems_present():
    missing = sorted(set(REQUIRED_IDS) - set(ALL_IDS))
    assert not missing, f"missing hardware YAML for {missing}"


@pytest.mark.parametrize("hw_id", ALL_IDS)
def test_every_yaml_loads(hw_id):
    hw = load_hardware(hw_id)
    assert hw.id == hw_id, "file name must equal the id inside it"


def test_load_by_path(tmp_path):
    dst = tmp_path / "my-h100.yaml"
    shutil.copy(HARDWARE_DIR / "h100-sxm.yaml", dst)
    by_path = load_hardware_file(str(dst))
    assert by_path == load_hardware("h100-sxm")


def test_load_hardware_takes_ids_only(tmp_path):
    """A path given where an id goes is an unknown id: the catalogue lookup never opens it."""
    dst = tmp_path / "my-h100.yaml"
    shutil.copy(HARDWARE_DIR / "h100-sxm.yaml", dst)
    for ref in (str(dst), "/proc/self/environ", "/dev/zero", "../hardware/h100-sxm", "h100-sxm.yaml"):
        with pytest.raises(InputError, match="unknown hardware"):
            load_hardware(ref)


def test_unknown_id_lists_known_ids():
    with pytest.raises(InputError) as err:
        load_hardware("h1000-sxm")
    msg = str(err.value)
    assert "h1000-sxm" in msg
    for hw_id in ALL_IDS:
        assert hw_id in msg
    assert "\n" not in msg


def test_invalid_yaml_is_one_line_error(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("id: [unclosed\n")
    with pytest.raises(InputError) as err:
        load_hardware_file(str(bad))
    assert "not valid YAML" in str(err.value)
    assert "\n" not in str(err.value)


# --- sources and schema errors -----------------------------------------------------------


def test_spec_missing_a_source_fails_with_clear_message():
    data = _raw("h100-sxm")
    del data["sources"]["gpu.tdp_w"]
    with pytest.raises(InputError) as err:
        parse_hardware(data, origin="hardware(test)")
    msg = str(err.value)
    assert "no source for gpu.tdp_w" in msg
    assert "\n" not in msg


def test_parent_path_source_covers_children():
    data = _raw("h100-sxm")
    gpu_keys = [k for k in data["sources"] if k.startswith("gpu.")]
    for k in gpu_keys:
        del data["sources"][k]
    data["sources"]["gpu"] = "NVIDIA H100 datasheet (all GPU fields)"
    parse_hardware(data)  # no error: 'gpu' covers every gpu.* number


def test_unknown_key_fails_naming_the_field():
    data = _raw("h100-sxm")
    data["gpu"]["bandwith_gb_per_s"] = 3350
    with pytest.raises(InputError) as err:
        parse_hardware(data, origin="hardware(test)")
    msg = str(err.value)
    assert "gpu.bandwith_gb_per_s" in msg
    assert "unknown field" in msg
    assert "\n" not in msg


def test_usable_above_physical_is_rejected():
    data = _raw("h100-sxm")
    data["gpu"]["hbm_usable_gib"] = 81
    with pytest.raises(InputError) as err:
        parse_hardware(data)
    assert "hbm_usable_gib(81" in str(err.value)


def test_spec_is_frozen():
    hw = load_hardware("h100-sxm")
    with pytest.raises(Exception):
        hw.gpu.tdp_w = 1


@pytest.mark.parametrize("hw_id", ALL_IDS)
def test_every_efficiency_group_has_a_source(hw_id):
    eff = load_hardware(hw_id).efficiency
    groups = [f for f in Efficiencies.model_fields if f not in ("sources", "collectives")]
    missing = [g for g in groups if not eff.sources.get(g, "").strip()]
    assert not missing, f"{hw_id}: efficiency groups without a source: {missing}"


@pytest.mark.parametrize("hw_id", ALL_IDS)
def test_price_has_provider_and_date(hw_id):
    price = load_hardware(hw_id).price
    assert price.cloud_provider.strip()
    assert price.cloud_date[:4].isdigit()


# --- dense peaks -----------------------------------------------------------------------


@pytest.mark.parametrize("hw_id, precision, tflops", REFERENCE_DENSE_PEAKS)
def test_dense_peak_matches_references(hw_id, precision, tflops):
    got = load_hardware(hw_id).gpu.peak_flop_per_s(precision)
    assert got == pytest.approx(tflops * TERA, rel=0.01)


@pytest.mark.parametrize("hw_id", _present(NO_FP4))
def test_no_fp4_before_blackwell(hw_id):
    gpu = load_hardware(hw_id).gpu
    assert gpu.peak_dense_tflop_per_s.fp4 is None
    assert not gpu.supports("fp4")
    with pytest.raises(InputError) as err:
        gpu.peak_flop_per_s("fp4")
    assert "fp4" in str(err.value)


@pytest.mark.parametrize("hw_id", _present(NO_FP8))
def test_no_fp8_on_ampere(hw_id):
    with pytest.raises(InputError):
        load_hardware(hw_id).gpu.peak_flop_per_s("fp8")


def test_unknown_precision_is_rejected():
    with pytest.raises(InputError) as err:
        load_hardware("h100-sxm").gpu.peak_flop_per_s("int3")
    assert "int3" in str(err.value)


@pytest.mark.parametrize("hw_id", ALL_IDS)
def test_peak_ratios_are_dense_consistent(hw_id):
    """fp16 == bf16, fp8 == 2 x bf16, tf32 == bf16 / 2 on every part here: a sparse figure
    entered for one precision only breaks these ratios."""
    p = load_hardware(hw_id).gpu.peak_dense_tflop_per_s
    assert p.fp16 == pytest.approx(p.bf16, rel=0.01)
    if p.fp8 is not None:
        assert p.fp8 == pytest.approx(2 * p.bf16, rel=0.01)
    if p.tf32 is not None:
        assert p.tf32 == pytest.approx(p.bf16 / 2, rel=0.03)
    if p.fp4 is not None:
        assert 2 * p.fp8 * 0.99 <= p.fp4 <= 3 * p.fp8 * 1.01


# --- memory ----------------------------------------------------------------------------


@pytest.mark.parametrize("hw_id", ALL_IDS)
def test_usable_hbm_at_most_physical(hw_id):
    gpu = load_hardware(hw_id).gpu
    assert 0 < gpu.hbm_usable_bytes <= gpu.hbm_bytes
    # usable is the CUDA/ROCm-visible capacity less a context, not a guess far below it
    assert gpu.hbm_usable_gib >= 0.9 * gpu.hbm_capacity_gib


# --- interconnect ----------------------------------------------------------------------


@pytest.mark.parametrize("hw_id, bidirectional", DATASHEET_BIDIRECTIONAL_GB_PER_S)
def test_scale_up_is_per_direction(hw_id, bidirectional):
    if hw_id not in ALL_IDS:
        pytest.skip(f"{hw_id} not present")
    up = load_hardware(hw_id).scale_up
    assert up.bandwidth_per_direction_gb_per_s == pytest.approx(bidirectional / 2, rel=0.01)
    assert up.bandwidth_bytes_per_s == pytest.approx(bidirectional / 2 * GIGA, rel=0.01)


@pytest.mark.parametrize("hw_id", _present(NVLS_SYSTEMS))
def test_nvls_from_hopper_on(hw_id):
    assert load_hardware(hw_id).scale_up.in_network_reduction


@pytest.mark.parametrize("hw_id", _present(NO_IN_NETWORK_REDUCTION))
def test_no_in_network_reduction_without_nvswitch3(hw_id):
    assert not load_hardware(hw_id).scale_up.in_network_reduction


@pytest.mark.parametrize("hw_id", ALL_IDS)
def test_scale_out_is_bits_not_bytes(hw_id):
    """NIC line rates are Gb/s (100/200/400/800); bytes/s = rate / 8, and far below NVLink."""
    hw = load_hardware(hw_id)
    out = hw.scale_out
    assert out.nic_bandwidth_gbit_per_s in (100, 200, 400, 800, 1600)   # 1600: ConnectX-9
    expected = out.nics_per_gpu * out.nic_bandwidth_gbit_per_s * GIGA / BITS_PER_BYTE
    assert out.bandwidth_bytes_per_s == pytest.approx(expected)
    assert out.bandwidth_bytes_per_s < hw.scale_up.bandwidth_bytes_per_s


def test_rack_scale_domains():
    for hw_id in _present(["gb200-nvl72", "gb300-nvl72"]):
        hw = load_hardware(hw_id)
        assert hw.scale_up.domain_size == 72
        assert hw.power.gpus_per_node == 72
        assert hw.scale_up.gpus_per_host == 4   # 18 compute trays of 4 GPUs


# --- efficiencies ----------------------------------------------------------------------


@pytest.mark.parametrize("hw_id", ALL_IDS)
def test_gemm_efficiency_for_every_supported_training_precision(hw_id):
    hw = load_hardware(hw_id)
    for precision in ("bf16", "fp16", "fp8", "fp4"):
        if hw.gpu.supports(precision):
            assert precision in hw.efficiency.gemm, f"{hw_id}: no GEMM efficiency for {precision}"
    for curve in hw.efficiency.gemm:
        precision = GEMM_CURVES.get(curve, curve)        # fp8_blockwise runs at the fp8 peak
        assert precision in PRECISIONS and hw.gpu.supports(precision)


@pytest.mark.parametrize("hw_id", ALL_IDS)
def test_efficiencies_are_physically_plausible(hw_id):
    eff = load_hardware(hw_id).efficiency
    for g in eff.gemm.values():
        assert 0.3 <= g.efficiency_max <= 0.95
    assert eff.attention.bwd_efficiency_max <= eff.attention.fwd_efficiency_max
    assert 0.6 <= eff.memory_efficiency <= 0.95
    assert 0.5 <= eff.scale_up_bus_efficiency <= 1
    assert 0.5 <= eff.scale_out_bus_efficiency <= 1
    assert 0 < eff.launch_overhead_s < 20e-6
    assert 0 < eff.scale_up_latency_s < eff.scale_out_latency_s < 50e-6


def test_raw_yaml_copy_is_not_mutated_by_loading():
    data = _raw("b200")
    before = copy.deepcopy(data)
    parse_hardware(data)
    assert data == before


def test_hardware_dir_holds_only_specs():
    for path in Path(HARDWARE_DIR).glob("*.yaml"):
        assert _raw(path.stem)["id"] == path.stem


# --- variants --------------------------------------------------------------------------


def test_power_limited_h100_peak_is_interpolated_between_its_datasheet_bounds():
    """torchtitan's 500 W HBM2e H100: between H100 NVL (400 W, 1,671 / 2 TFLOP/s BF16) and
    SXM (700 W, 989.4), linear in the power limit."""
    gpu = load_hardware("h100-sxm-hbm2e-500w").gpu
    nvl, sxm = 1671 / 2, 989.4
    assert gpu.peak_flop_per_s("bf16") == pytest.approx((nvl + (sxm - nvl) * (500 - 400) / (700 - 400)) * TERA, rel=1e-3)
    assert gpu.hbm_bandwidth_bytes_per_s == pytest.approx(2.4e12)
    assert gpu.tdp_w == 500


def test_a_variant_inherits_its_reference_efficiencies():
    var, ref = load_hardware("h100-sxm-hbm2e-500w"), load_hardware("h100-sxm")
    assert var.variant_of == "h100-sxm"
    assert var.efficiency == ref.efficiency
    data = _raw("h100-sxm-hbm2e-500w")
    data["efficiency"] = copy.deepcopy(_raw("a100-sxm-80gb")["efficiency"])   # an explicit block wins
    assert parse_hardware(data).efficiency != ref.efficiency


def test_a_variant_uses_its_reference_calibration_profile():
    from perfmodel.spec.profile import efficiencies_for
    variant, note = efficiencies_for(load_hardware("h100-sxm-hbm2e-500w"))
    assert variant == efficiencies_for(load_hardware("h100-sxm"))[0] != load_hardware("h100-sxm").efficiency
    assert "calibration/profiles/h100-sxm.yaml" in note


# --- power: training draw, cooling, power-limit points ----------------------------------

# What the sources state; None where none was found
# (docs/sizing_constraints.md, 'What each hardware spec states about power').
COOLING = {
    "h100-sxm": "air", "h200-sxm": "air", "b200": "air", "mi300x": "air",        # MLPerf system descriptions
    "gb200-nvl72": "liquid", "gb200-nvl576": "liquid", "gb300-nvl72": "liquid", "mi355x": "liquid",
    "a100-sxm-80gb": None, "a100-sxm-40gb": None, "b300": None, "h800-sxm": None,
}
TRAINING_DRAW_W = {"h100-sxm": 684, "h200-sxm": 686}    # median nvidia-smi draw of a lent GPU's training step
LIMIT_POINTS = {                                        # (W, dense BF16 TFLOP/s) of the same die at a lower limit
    "h100-sxm": (400, 835.5),       # H100 NVL
    "gb200-nvl72": (1000, 2250),    # HGX B200
    "gb200-nvl576": (1000, 2250),
    "gb300-nvl72": (1100, 2250),    # HGX B300
    "mi355x": (1000, 2306.9),       # MI350X: 2.2 GHz x 1024 x 512 x 2
}


@pytest.mark.parametrize("hw_id", sorted(COOLING))
def test_cooling_class_is_what_the_source_states(hw_id):
    assert load_hardware(hw_id).power.cooling == COOLING[hw_id]


@pytest.mark.parametrize("hw_id", ALL_IDS)
def test_training_draw_only_where_measured_and_below_tdp(hw_id):
    gpu = load_hardware(hw_id).gpu
    assert gpu.training_power_w == TRAINING_DRAW_W.get(hw_id)
    if gpu.training_power_w is not None:
        assert 0.9 * gpu.tdp_w < gpu.training_power_w <= gpu.tdp_w   # both steps ran at the 700 W cap


def test_training_draw_above_tdp_is_rejected():
    data = _raw("h100-sxm")
    data["gpu"]["training_power_w"] = 701
    with pytest.raises(InputError, match=r"training_power_w\(701\) exceeds tdp_w\(700\)"):
        parse_hardware(data)


def test_power_limit_point_must_lie_below_the_tdp_and_peak():
    data = _raw("h100-sxm")
    data["gpu"]["power_limit_point"] = {"power_w": 700, "bf16_tflop_per_s": 835.5}
    with pytest.raises(InputError, match="must lie below"):
        parse_hardware(data)
    data["gpu"]["power_limit_point"] = {"power_w": 400, "bf16_tflop_per_s": 1000}
    with pytest.raises(InputError, match="must lie below"):
        parse_hardware(data)


@pytest.mark.parametrize("hw_id", ALL_IDS)
def test_power_limit_points_are_the_published_ones(hw_id):
    pt = load_hardware(hw_id).gpu.power_limit_point
    assert (None if pt is None else (pt.power_w, pt.bf16_tflop_per_s)) == LIMIT_POINTS.get(hw_id)


def test_mi350x_point_is_the_mi355x_formula_at_its_clock():
    """MI355X 2,400 MHz and MI350X 2,200 MHz, 1,024 matrix cores x 512 BF16 FMA x 2 FLOP."""
    assert 2200e6 * 1024 * 512 * 2 / TERA == pytest.approx(2306.9, abs=0.05)
    assert 2400e6 * 1024 * 512 * 2 / TERA == pytest.approx(load_hardware("mi355x").gpu.peak_dense_tflop_per_s.bf16,
                                                           abs=0.05)


@pytest.mark.parametrize("hw_id, cap_w, bf16, node_w", [
    # F = F0 + (F1 - F0)(P - P0)/(P1 - P0); node power less g (TDP - P)
    ("gb200-nvl72", 1100, 2250 + (2500 - 2250) * 100 / 200, 120_000 - 72 * 100),    # 2375, 112.8 kW
    ("gb300-nvl72", 1250, 2250 + (2500 - 2250) * 150 / 300, 134_400 - 72 * 150),    # 2375, 123.6 kW
    ("mi355x", 1200, 2306.9 + (2516.6 - 2306.9) * 200 / 400, 17_500 - 8 * 200),      # 2411.75, 15.9 kW
    ("mi355x", 1000, 2306.9, 17_500 - 8 * 400),                                     # at the published point
])
def test_a_cap_interpolates_between_the_published_point_and_the_tdp(hw_id, cap_w, bf16, node_w):
    from perfmodel.formulas.power import capped
    hw = load_hardware(hw_id)
    c = capped(hw, cap_w)
    assert c.gpu.peak_dense_tflop_per_s.bf16 == pytest.approx(bf16)
    assert c.gpu.peak_dense_tflop_per_s.fp8 == pytest.approx(hw.gpu.peak_dense_tflop_per_s.fp8 * bf16
                                                             / hw.gpu.peak_dense_tflop_per_s.bf16)
    assert c.gpu.hbm_bandwidth_gb_per_s == hw.gpu.hbm_bandwidth_gb_per_s
    assert c.power.node_power_w == pytest.approx(node_w)
    assert c.gpu.tdp_w == cap_w


def test_a_cap_below_the_published_point_is_an_error():
    from perfmodel.formulas.power import capped
    with pytest.raises(InputError, match=r"^facility.gpu_power_cap_w: 999 W is below the lowest published point"):
        capped(load_hardware("gb200-nvl72"), 999)


def test_a_cap_below_the_measured_training_draw_becomes_the_draw():
    """The H100's steps drew 684 W at their 700 W limit, nearly every sample at the cap; capped at
    500 W the limiter holds the draw there. Above the draw the measurement stands."""
    from perfmodel.formulas.power import capped
    h100 = load_hardware("h100-sxm")
    assert capped(h100, 500).gpu.training_power_w == 500
    assert capped(h100, 690).gpu.training_power_w == 684
    assert capped(load_hardware("mi355x"), 1200).gpu.training_power_w is None
