"""Hardware from headline numbers (``perfmodel.spec.headline``) and the price quote with its source."""

from __future__ import annotations

import pytest

import perfmodel as pm
from perfmodel.spec.errors import InputError
from perfmodel.spec.headline import Headline, headline_spec

EXAMPLE = pm.load_scenario("perfmodel/data/example_scenario.yaml")


def test_headline_numbers_replace_the_base_spec():
    h = Headline(base="h100-sxm", name="my GPU", peak_bf16_tflop_per_s=1978.8, hbm_capacity_gib=160,
                 hbm_bandwidth_gb_per_s=8000, scale_up_domain_size=72, scale_up_gb_per_s=900, nic_gbit_per_s=800,
                 usd_per_gpu_hour=3.5)
    s = headline_spec(h)
    base = pm.hardware("h100-sxm")
    assert s.variant_of == "h100-sxm" and s.id == "custom-h100-sxm" and s.name == "my GPU"
    # twice the H100's 989.4 dense BF16: every precision doubles with it (FP8 1978.9 -> 3957.8)
    assert s.gpu.peak_dense_tflop_per_s.bf16 == pytest.approx(1978.8)
    assert s.gpu.peak_dense_tflop_per_s.fp8 == pytest.approx(2 * base.gpu.peak_dense_tflop_per_s.fp8, rel=1e-6)
    # the H100's reserve, 80 - 79.1 = 0.9 GiB, kept
    assert s.gpu.hbm_usable_gib == pytest.approx(160 - 0.9)
    assert s.scale_out.bandwidth_bytes_per_s == pytest.approx(100e9)          # 800 Gb/s / 8
    assert s.scale_up.domain_size == 72 and s.scale_up.latency_us == base.scale_up.latency_us
    q = pm.price(pm.parse_scenario({**pm.scenario_to_dict(EXAMPLE), "hardware": s.model_dump(mode="json")}))
    assert q.usd_per_gpu_hour == 3.5 and q.basis == "listed" and "headline number" in q.source


def test_headline_numbers_are_checked():
    with pytest.raises(Exception):
        Headline(base="h100-sxm", peak_bf16_tflop_per_s=-1, hbm_capacity_gib=80, hbm_bandwidth_gb_per_s=1,
                 scale_up_domain_size=8, scale_up_gb_per_s=1, nic_gbit_per_s=1, usd_per_gpu_hour=1)
    with pytest.raises(InputError, match="unknown hardware"):
        headline_spec(Headline(base="../../etc/passwd", peak_bf16_tflop_per_s=1, hbm_capacity_gib=80,
                               hbm_bandwidth_gb_per_s=1, scale_up_domain_size=8, scale_up_gb_per_s=1,
                               nic_gbit_per_s=1, usd_per_gpu_hour=1))


@pytest.mark.parametrize("basis,price", [("listed", 6.88), ("hyperscaler", 4.25), ("neocloud", 3.00)])
def test_price_basis_picks_one_provider_class(basis, price):
    cost = pm.CostModel(cloud_class=basis)
    q = pm.price(EXAMPLE, cost=cost)
    assert q.usd_per_gpu_hour == price and q.basis == basis and q.source
    p = pm.predict(EXAMPLE, profile=None, cost=cost)
    assert p.cost_usd == pytest.approx(p.gpu_hours * price, rel=1e-12)


def test_a_class_without_a_sourced_price_says_so():
    sc = pm.parse_scenario({**pm.scenario_to_dict(EXAMPLE), "hardware": "gb200-nvl72", "num_gpus": 64,
                            "parallelism": {"tp": 4, "pp": 1, "cp": 2}})
    with pytest.raises(InputError, match="cost.cloud_class: no hyperscaler on-demand price is sourced for "
                                         "gb200-nvl72"):
        pm.predict(sc, profile=None, cost=pm.CostModel(cloud_class="hyperscaler"))
    assert pm.price(sc, cost=pm.CostModel(cloud_class="neocloud")).usd_per_gpu_hour == 4.54
    own = pm.price(sc, cost=pm.CostModel(usd_per_gpu_hour=2.0, cloud_class="hyperscaler"))
    assert (own.usd_per_gpu_hour, own.basis, own.source) == (2.0, "own", "your price")


def test_every_class_price_has_its_own_source():
    for hw_id in pm.hardware_ids():
        hw = pm.hardware(hw_id)
        for cls in ("hyperscaler", "neocloud"):
            if hw.price.class_usd_per_gpu_hour(cls) is not None:
                assert hw.sources[f"price.{cls}_usd_per_gpu_hour"]
