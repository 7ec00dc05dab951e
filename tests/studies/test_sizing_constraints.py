"""Sizing under a power envelope and with a fabric: GPU counts by hand, the constraint that binds,
and the CLI's --power-mw."""

from __future__ import annotations

import json

import pytest

from perfmodel.cli import main
from perfmodel.formulas.power import facility_power_per_gpu_w, gpus_under_envelope, tokens_per_mwh
from perfmodel.spec.facility import Facility
from perfmodel.spec.hardware import load_hardware
from perfmodel.spec.scenario import parse_scenario
from perfmodel.studies.search.constraints import capped_counts, power_cap
from perfmodel.studies.search.search import SearchOptions
from perfmodel.studies.search.sizing import size_cluster

SMALL = dict(name="small", num_layers=8, hidden_size=1024, num_attention_heads=16, ffn_hidden_size=4096,
             vocab_size=32000)
OPTS = SearchOptions(recompute=("none",), max_micro_batch_size=2)


def llama70b(**over):
    base = dict(hardware="h100-sxm", num_gpus=1024, model="llama3-70b", seq_length=8192, global_batch_size=2048,
                training_tokens=15e12)
    return parse_scenario({**base, **over})


def test_power_limited_count_is_the_envelope_over_per_gpu_facility_power():
    """Llama 3 70B on 15T tokens at a 20 MW site with PUE 1.3, on DGX H100 (10.2 kW, 8 GPUs):
    p = 10,200 / 8 x 1.3 = 1,657.5 W per GPU at the facility; 20e6 / 1,657.5 = 12,066.4 GPUs,
    1,508 whole nodes = 12,064 GPUs."""
    sc = llama70b(facility={"power_mw": 20, "pue": 1.3})
    cap = power_cap(load_hardware("h100-sxm"), sc)
    assert cap.per_gpu_facility_w == pytest.approx(10_200 / 8 * 1.3)
    assert cap.num_gpus == 12_064 == 8 * int(20e6 / (10_200 / 8 * 1.3) // 8)
    # a GB200 NVL72 rack (120 kW, 72 GPUs) is the unit: 20e6 / (120e3 x 1.3) = 128.2 racks
    gb = power_cap(load_hardware("gb200-nvl72"), sc)
    assert gb.num_gpus == 128 * 72
    # and the largest multiples of 1,024, 2,048, 4,096, 8,192 under it: 11,264, 10,240, 8,192, 8,192
    assert capped_counts((4096, 8192, 16384), cap) == (4096, 8192, 10_240, 11_264, 12_064)
    assert power_cap(load_hardware("h100-sxm"), llama70b()) is None


def test_formulas_by_hand():
    hw = load_hardware("h100-sxm")
    assert facility_power_per_gpu_w(hw, 1.25, 30.0) == pytest.approx((1275 + 30) * 1.25)
    assert gpus_under_envelope(1.0, 1000.0, 8) == 1000
    assert gpus_under_envelope(1.0, 1001.0, 8) == 992
    assert tokens_per_mwh(3e9, 1000.0) == pytest.approx(3e9)


def test_fabric_power_counts_against_the_envelope():
    """A 1:1 three-tier fabric (two tiers of 64-port switches reach 2,048 NICs): per GPU one NIC
    transceiver (8 W) and about 5 switch ports (leaf down, leaf up, spine down, spine up, core) in
    twin-port transceivers (2.5 x 15 W): about 45.5 W, so the 20 MW site holds fewer GPUs."""
    sc = llama70b(facility={"power_mw": 20, "pue": 1.3}, fabric={"tiers": 3})
    cap = power_cap(load_hardware("h100-sxm"), sc)
    assert cap.fabric_w_per_gpu == pytest.approx(8 + 2.5 * 15, rel=0.02) and not cap.switch_power_known
    assert cap.num_gpus < 12_064
    assert cap.num_gpus == gpus_under_envelope(20, (1275 + cap.fabric_w_per_gpu) * 1.3, 8)
    # the count with its own fabric fits; one node more, with its fabric, does not
    from perfmodel.formulas.fabric import bill_of_materials
    from perfmodel.spec.fabric import FabricSpec

    def facility_w(n):
        return (n * 1275 + bill_of_materials(n, 8, 1, FabricSpec(tiers=3)).power_w) * 1.3
    assert facility_w(cap.num_gpus) <= 20e6 < facility_w(cap.num_gpus + 8)


def small(**over):
    base = dict(hardware="h100-sxm", num_gpus=8, model=dict(SMALL), seq_length=2048, global_batch_size=128)
    return parse_scenario({**base, **over})


def test_power_binds_when_the_fastest_count_is_the_envelope():
    """An envelope of 64 H100 (64 x 1,275 W x 1.25 = 102 kW): counts beyond it are not tried; with
    a deadline nothing meets, the fastest is the envelope's count, power binds, and relaxing it
    to the next count is reported."""
    fac = Facility(power_mw=64 * 1275 * 1.25 / 1e6, pue=1.25)
    free = size_cluster(small(), 1e11, hardware_ids=["h100-sxm"], gpu_counts=[16, 32, 64, 128], options=OPTS).rows[0]
    fastest_free = min(o.time_to_train_s for o in free.options)
    row = size_cluster(small(), 1e11, deadline_s=fastest_free * 0.5, hardware_ids=["h100-sxm"],
                       gpu_counts=[16, 32, 64, 128], options=OPTS, facility=fac).rows[0]
    assert row.constraints.power_cap.num_gpus == 64
    assert max(o.num_gpus for o in row.options) <= 64
    assert row.rule == "deadline_missed" and row.binding.num_gpus == 64
    assert row.constraints.binding == "power"
    assert row.constraints.relaxed is not None and row.constraints.relaxed.num_gpus == 128
    assert row.constraints.relaxed.time_to_train_s < row.binding.time_to_train_s
    d = row.to_dict()
    assert d["binding_constraint"] == "power" and d["power_cap"]["num_gpus"] == 64
    assert d["tokens_per_mwh"] == pytest.approx(1e11 / (row.binding.energy_kwh / 1000))
    # without an envelope the same row is bound by the deadline (the counts tried)
    unbound = size_cluster(small(), 1e11, deadline_s=fastest_free * 0.5, hardware_ids=["h100-sxm"],
                           gpu_counts=[16, 32, 64, 128], options=OPTS).rows[0]
    assert unbound.constraints.binding == "deadline" and unbound.constraints.power_cap is None


def test_no_envelope_no_fabric_keeps_the_rows():
    a = size_cluster(small(), 1e11, hardware_ids=["h100-sxm"], gpu_counts=[8, 16], options=OPTS).rows[0]
    b = size_cluster(small(facility={"pue": 1.25}), 1e11, hardware_ids=["h100-sxm"], gpu_counts=[8, 16],
                     options=OPTS).rows[0]
    assert [o.time_to_train_s for o in a.options] == [o.time_to_train_s for o in b.options]
    assert [o.cost_usd for o in a.options] == [o.cost_usd for o in b.options]


def test_cli_power_mw(tmp_path, capsys):
    import yaml
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(json.loads(small().model_dump_json(exclude_none=True))))
    base = ["size", str(path), "--tokens", "1e11", "--hardware", "h100-sxm", "--gpus", "8,16,32",
            "--recompute", "none", "--no-profile", "--jobs", "1"]
    assert main(base + ["--power-mw", "0.03", "--pue", "1.25", "--format", "json"]) == 0
    row = json.loads(capsys.readouterr().out)["rows"][0]
    # 0.03 MW / (1,275 W x 1.25) = 18.8 GPUs -> 2 nodes = 16
    assert row["power_cap"]["num_gpus"] == 16 and row["num_gpus"] <= 16
    assert main(base + ["--power-mw", "0.03"]) == 0
    out = capsys.readouterr().out
    assert "holds 16 GPUs" in out and "binds:" in out and "tokens per MWh" in out
    assert main(base + ["--power-mw", "-1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--power-mw" in err and "Traceback" not in err
    assert main(base + ["--power-mw", "0.03", "--gpu-power-cap-w", "500", "--format", "json"]) == 0
    capped_row = json.loads(capsys.readouterr().out)["rows"][0]
    # 0.03 MW / (1,075 W x 1.25) = 22.3 GPUs -> 2 nodes = 16 still
    assert capped_row["power_cap"]["per_gpu_facility_w"] == pytest.approx(1075 * 1.25)
    assert main(base + ["--gpu-power-cap-w", "nan"]) == 2
    assert "--gpu-power-cap-w" in capsys.readouterr().err


def test_an_oversubscribed_fabric_slows_the_count_that_crosses_it_and_network_binds():
    """8-port leaves at 8:1 (7 down, 1 up: a leaf reaches 7 hosts): 64 GPUs (8 hosts, DP 64) cross
    the spine, 32 GPUs (4 hosts) do not. A deadline between the 64-GPU time at 1:1 and at 8:1:
    nothing meets it, the fastest would on a non-blocking fabric, so the network binds."""
    tight = {"oversubscription": 8, "switch_radix": 8}
    flat = {"oversubscription": 1, "switch_radix": 8}
    rows = {name: size_cluster(small(fabric=f), 1e11, hardware_ids=["h100-sxm"], gpu_counts=[32, 64],
                               options=OPTS).rows[0] for name, f in (("tight", tight), ("flat", flat))}
    t = {name: {o.num_gpus: o.time_to_train_s for o in r.options} for name, r in rows.items()}
    assert t["tight"][32] == pytest.approx(t["flat"][32])      # inside one leaf: no crossing
    assert t["tight"][64] > t["flat"][64]
    deadline = (t["tight"][64] + t["flat"][64]) / 2
    row = size_cluster(small(fabric=tight), 1e11, deadline_s=deadline, hardware_ids=["h100-sxm"],
                       gpu_counts=[32, 64], options=OPTS).rows[0]
    assert row.rule == "deadline_missed" and row.binding.num_gpus == 64
    assert row.constraints.binding == "network"
    assert row.constraints.nonblocking_time_s == pytest.approx(t["flat"][64])


def test_rent_reserve_or_spot_break_even_by_hand():
    """Your prices: reserved 1 y $4.50 against on demand $6.88 (the h100-sxm listed price): reserving
    beats renting above 4.50 / 6.88 = 65.4% utilisation over the term. Spot at $3.00: its run is
    slower by its preemptions, and pays below W_on_demand / W_spot of the on-demand price. No 3-year
    price: unavailable, said so."""
    from perfmodel.present.constraints import capacity_text
    from perfmodel.spec.cost import CostModel
    cost = CostModel(reserved_1y_usd_per_gpu_hour=4.5, spot_usd_per_gpu_hour=3.0)
    row = size_cluster(small(), 1e11, hardware_ids=["h100-sxm"], gpu_counts=[16], options=OPTS,
                       cost_model=cost).rows[0]
    q = {c.capacity: c for c in row.constraints.capacity}
    assert q["on_demand"].usd_per_gpu_hour == 6.88
    assert q["on_demand"].time_to_train_s == pytest.approx(row.choice.time_to_train_s)
    assert q["reserved_1y"].break_even == pytest.approx(4.5 / 6.88)
    assert q["reserved_1y"].cost_usd == pytest.approx(16 * row.choice.time_to_train_s * 4.5 / 3600)
    assert q["reserved_3y"].usd_per_gpu_hour is None and q["reserved_3y"].cost_usd is None
    assert "unavailable" in q["reserved_3y"].reason
    assert q["spot"].time_to_train_s > q["on_demand"].time_to_train_s
    assert q["spot"].break_even == pytest.approx(q["on_demand"].time_to_train_s / q["spot"].time_to_train_s)
    assert q["spot"].cost_usd == pytest.approx(16 * q["spot"].time_to_train_s * 3.0 / 3600)
    text = capacity_text("h100-sxm", row.constraints)
    assert "reserved 3 y unavailable (no sourced price)" in text and "beats on demand above 65.4%" in text


def test_a_gpu_power_cap_lowers_the_clock_and_fits_more_gpus():
    """H100 capped at 500 W: between the H100 NVL point (835.5 dense BF16 at 400 W) and the SXM's
    989.4 at 700 W, 835.5 + 153.9 x 100 / 300 = 886.8 TFLOP/s, the peak of
    hardware/h100-sxm-hbm2e-500w.yaml; the node draws 10,200 - 8 x 200 = 8,600 W (that spec's
    figure). 20 MW at PUE 1.3: 1,075 W x 1.3 = 1,397.5 W per GPU -> 14,311 -> 1,788 nodes = 14,304."""
    from perfmodel.formulas.power import capped
    from perfmodel.spec.errors import InputError
    h100 = load_hardware("h100-sxm")
    c = capped(h100, 500.0)
    ref = load_hardware("h100-sxm-hbm2e-500w")
    assert c.gpu.peak_dense_tflop_per_s.bf16 == pytest.approx(886.8) == ref.gpu.peak_dense_tflop_per_s.bf16
    assert c.power.node_power_w == 8600.0 == ref.power.node_power_w
    assert c.gpu.peak_dense_tflop_per_s.fp8 == pytest.approx(1978.9 * 886.8 / 989.4)
    assert capped(h100, 700.0) is h100 and capped(h100, None) is h100
    with pytest.raises(InputError, match="^facility.gpu_power_cap_w: .*no extrapolation"):
        capped(h100, 300.0)
    with pytest.raises(InputError, match="^facility.gpu_power_cap_w: no published peak of b200"):
        capped(load_hardware("b200"), 800.0)
    sc = llama70b(facility={"power_mw": 20, "pue": 1.3, "gpu_power_cap_w": 500})
    assert power_cap(h100, sc).num_gpus == 14_304
    # a type the cap cannot be modelled for gets a row that says so, not a failed sizing
    rows = size_cluster(small(facility={"gpu_power_cap_w": 500}), 1e11, hardware_ids=["h100-sxm", "b200"],
                        gpu_counts=[8, 16], options=OPTS).rows
    assert rows[0].choice is not None
    assert rows[1].rule == "none_runs" and "no published peak of b200" in rows[1].none_reason


def test_a_capped_gpu_is_slower_where_compute_bound():
    import perfmodel as pm
    base = small(num_gpus=8, parallelism={"tp": 1}, training_tokens=1e10)
    p700 = pm.predict(base, profile=None)
    p500 = pm.predict(base.model_copy(update={"facility": Facility(gpu_power_cap_w=500.0)}), profile=None)
    assert p500.step_time_s > p700.step_time_s
    assert p500.energy_kwh < p700.energy_kwh * p500.step_time_s / p700.step_time_s   # less power per second


def test_llama3_70b_at_a_20_mw_site_is_bound_by_power():
    """Llama 3 70B, 15T tokens, batch 4,096 x 8,192, a 12-day deadline, H100 at 20 MW and PUE 1.3:
    the envelope holds 12,064 GPUs (envelope / 1,657.5 W per GPU, whole nodes); every option runs
    at or under it, none meets the deadline, and the next count beyond (16,384) is faster: power
    binds, and the row says what relaxing it buys."""
    import perfmodel as pm
    sc = llama70b(global_batch_size=4096, facility={"power_mw": 20, "pue": 1.3})
    row = pm.size(sc, deadline_s=12 * 86400.0, hardware_ids=["h100-sxm"], grow_batch=False).rows[0]
    cons = row.constraints
    assert cons.power_cap.num_gpus == 12_064
    assert max(o.num_gpus for o in row.options) <= 12_064
    assert row.rule == "deadline_missed" and cons.binding == "power"
    assert cons.relaxed.num_gpus == 16_384 and cons.relaxed.time_to_train_s < row.binding.time_to_train_s
    assert cons.tokens_per_mwh == pytest.approx(15e12 / (row.binding.energy_kwh / 1000))


def test_the_row_carries_the_fabric_bill_of_materials_and_says_capex_is_unavailable():
    from perfmodel.present.constraints import fabric_text
    row = size_cluster(small(fabric={"oversubscription": 1}), 1e11, hardware_ids=["h100-sxm"], gpu_counts=[1024],
                       options=OPTS).rows[0]
    bom = row.constraints.fabric_bom
    assert (bom.num_leaf_switches, bom.num_spine_switches, bom.num_cables, bom.num_transceivers) == (32, 16, 2048, 2560)
    text = fabric_text("h100-sxm", row.constraints)
    assert "48 switches (32 leaf, 16 spine)" in text and "capex unavailable (no sourced prices)" in text
    assert row.to_dict()["fabric_bom"]["num_switches"] == 48
