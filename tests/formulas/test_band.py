"""The error band: reading quantiles, the band of a rate and of a time, probabilities, and the
two-level fit on residuals small enough to compute by hand."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import perfmodel as pm
from perfmodel.engine.band import ErrorBand, band_table, generation_of, kind_of
from perfmodel.studies.observed.bands import Residual, band_quantiles, coverage, held_out, parts, weighted_quantiles

BAND = ErrorBand("hopper/dense", (0.05, 0.10, 0.50, 0.90, 0.95), (-0.2, -0.1, 0.05, 0.3, 0.5), 3, 0.8)


def test_rate_and_duration_bands_hand_computed():
    """A rate predicted at 1,000: measured = predicted / e^r, so p10 = 1000 e^-0.3 = 740.818,
    p50 = 1000 e^-0.05 = 951.229, p90 = 1000 e^0.1 = 1105.171. A time predicted at 10 s: measured =
    predicted x e^r: 9.0484, 10.5127, 13.4986."""
    assert BAND.rate(1000.0) == pytest.approx({"p10": 740.818, "p50": 951.229, "p90": 1105.171}, abs=1e-3)
    assert BAND.duration(10.0) == pytest.approx({"p10": 9.04837, "p50": 10.51271, "p90": 13.49859}, abs=1e-5)


def test_cdf_probability_and_rank_hand_computed():
    """cdf(0.175) lies halfway from q50 = 0.05 to q90 = 0.3: 0.7. Beyond the stored levels the band
    claims no more than its ends: 0.05 and 0.95. A deadline at predicted x e^0.3 is met when
    r <= 0.3: 0.9. A measured rate equal to the prediction has r = 0: 0.1 + 0.4 x 0.1 / 0.15 = 0.3667."""
    assert BAND.cdf(0.175) == pytest.approx(0.7)
    assert BAND.cdf(-1.0) == 0.05 and BAND.cdf(1.0) == 0.95
    assert BAND.probability_within(10.0, 10.0 * math.exp(0.3)) == pytest.approx(0.9)
    assert BAND.rank_of(1000.0, 1000.0) == pytest.approx(0.1 + 0.4 * 0.1 / 0.15)
    with pytest.raises(pm.InputError):
        BAND.probability_within(0.0, 1.0)


def test_weighted_quantiles_midpoint_rule():
    """Values 1, 2, 3 with weights 1, 1, 2: midpoints at 0.5/4, 1.5/4, 3/4 -> levels 0.125, 0.375,
    0.75; the median lies between 2 (0.375) and 3 (0.75): 2 + (0.5 - 0.375) / 0.375 = 2.3333."""
    q = weighted_quantiles([3, 1, 2], [2, 1, 1], [0.05, 0.125, 0.5, 0.75, 0.9])
    assert list(q) == pytest.approx([1.0, 1.0, 2 + 1 / 3, 3.0, 3.0])


def rows():
    """Source A (hopper, dense): r = 0.1, 0.2, 0.3, offset 0.2 (3 runs), within -0.1, 0, 0.1;
    source B: r = -0.1, 0.1, offset 0.0 (2 runs), within -0.1, 0.1. Every run weighs 1."""
    a = [Residual(f"a{i}", "A", "h100-sxm", "hopper", "dense", r) for i, r in enumerate((0.1, 0.2, 0.3))]
    b = [Residual(f"b{i}", "B", "h100-sxm", "hopper", "dense", r) for i, r in enumerate((-0.1, 0.1))]
    return a + b


def test_two_level_band_hand_computed():
    """b in {0.2 (weight 3), 0.0 (weight 2)}, e in {-0.1, 0, 0.1, -0.1, 0.1} (1 each): b + e is
    -0.1 (2 + 2), 0 (2), 0.1 (2 + 2 + 3 + 3), 0.2 (3), 0.3 (3 + 3) of 25. Midpoints: -0.1 at 1/25 and
    3/25, so 10% is -0.1; 0.1 spans 6/25 to 16/25, so the median is 0.1; 0.2 at 17.5/25 = 0.7; 0.3 at
    20.5/25 and 23.5/25, so 90% is 0.3. (Every unit weighing the same instead, 70% falls between
    0.1 and 0.2, at 0.152.)"""
    q, units = band_quantiles(parts(rows()), "hopper", "dense", (0.1, 0.5, 0.7, 0.9))
    assert units == 2 and list(q) == pytest.approx([-0.1, 0.1, 0.2, 0.3])
    # a generation without units, or 'any', uses every unit's offset: the same here
    assert list(band_quantiles(parts(rows()), "blackwell", "dense", (0.1, 0.5, 0.7, 0.9))[0]) == pytest.approx(list(q))


def test_a_generation_of_one_unit_borrows_every_units_offsets():
    """Source C, one Blackwell run at r = 0.5: one unit shows no spread of offsets, so a Blackwell
    band draws b from all three, {0.2 (3), 0.0 (2), 0.5 (1)}, with the five e of A and B: 25 pairs
    weighing 30. The two lowest, 0.0 - 0.1 = -0.1 (2 each), sit at 1/30 and 3/30: 5% is -0.1; the
    two highest, 0.5 + 0.1 = 0.6 (1 each), at 28.5/30 = 0.95 and 29.5/30: 95% is 0.6. (Its own
    offset alone would give 0.4 to 0.6.) Hopper, with two units, keeps its own."""
    c = Residual("c0", "C", "b200", "blackwell", "dense", 0.5)
    p = parts(rows() + [c])
    q, units = band_quantiles(p, "blackwell", "dense", (0.05, 0.95))
    assert units == 3 and list(q) == pytest.approx([-0.1, 0.6])
    assert band_quantiles(p, "hopper", "dense", (0.5,))[1] == 2


def test_leave_one_source_out_hand_computed():
    """Without A: b = 0, e = -0.1, 0.1 (midpoints 0.25, 0.75): the 80% band is [-0.1, 0.1] and
    covers A's 0.1, not 0.2 or 0.3. Without B: b = 0.2, e = -0.1, 0, 0.1: [0.1, 0.3] covers B's 0.1,
    not -0.1. Held-out coverage 2 of 5."""
    held = held_out(rows())
    assert list(held["a0"][[1, -2]]) == pytest.approx([-0.1, 0.1])
    assert list(held["b0"][[1, -2]]) == pytest.approx([0.1, 0.3])
    assert coverage(rows(), held)[0.8] == pytest.approx(0.4)



def test_two_stacks_of_one_source_are_two_units():
    """Source A's runs split by stack: 'x' with r = 0.1, 0.3 (offset 0.2, e -0.1, 0.1) and 'y' with
    r = 0.2 (offset 0.2, one run: no e). With B (offset 0.0, e -0.1, 0.1) Hopper has three units,
    b in {0.2 (2 runs), 0.2 (1), 0.0 (2)}, e in {-0.1, 0.1, -0.1, 0.1}: b + e is -0.1 (weight 2 + 2),
    0.1 (2 + 2 + 1 + 1 + 2 + 2 = 10) and 0.3 (2 + 2 + 1 + 1 = 6) of 20. Midpoints: -0.1 at 1/20 and
    3/20, so 10% is -0.1; 0.1 spans 4/20 to 14/20, so the median is 0.1; the first 0.3 sits at
    14.5/20 or later and the last at 19.5/20, so 90% is 0.3."""
    a = [Residual("a0", "A", "h100-sxm", "hopper", "dense", 0.1, "x"),
         Residual("a1", "A", "h100-sxm", "hopper", "dense", 0.2, "y"),
         Residual("a2", "A", "h100-sxm", "hopper", "dense", 0.3, "x")]
    b = [Residual(f"b{i}", "B", "h100-sxm", "hopper", "dense", r) for i, r in enumerate((-0.1, 0.1))]
    p = parts(a + b)
    assert sorted((round(b, 9), n) for b, n in p.offsets["hopper"]) == [(0.0, 2), (0.2, 1), (0.2, 2)]
    assert sorted(p.within["dense"]) == pytest.approx([-0.1, -0.1, 0.1, 0.1])
    q, units = band_quantiles(p, "hopper", "dense", (0.1, 0.5, 0.9))
    assert units == 3 and list(q) == pytest.approx([-0.1, 0.1, 0.3])
    # one stack per source, as before: two units, and A's middle run adds e = 0
    assert band_quantiles(parts(rows()), "hopper", "dense", (0.5,))[1] == 2
    # leave-one-source-out still holds out whole sources: without A, B's band alone
    assert list(held_out(a + b)["a1"][[1, -2]]) == pytest.approx([-0.1, 0.1])

def test_strata():
    assert generation_of(pm.hardware("h100-sxm-hbm2e-500w")) == "hopper"        # a variant counts as its GPU
    assert generation_of(pm.hardware("gb200-nvl72")) == "blackwell"
    assert kind_of(pm.model("deepseek-v3")) == "moe" and kind_of(pm.model("llama3-8b")) == "dense"
    custom = pm.hardware("h100-sxm").model_copy(update={"id": "my-gpu", "variant_of": None})
    assert generation_of(custom) == "any"


JOBS = st.builds(dict, hardware=st.sampled_from(pm.hardware_ids()),
                 model=st.sampled_from(["llama3-8b", "mixtral-8x7b", "deepseek-v3", "gpt3-175b"]))


@settings(max_examples=30, deadline=None)
@given(job=JOBS, x=st.floats(1e-3, 1e9))
def test_p10_le_p50_le_p90(job, x):
    """For every catalogue GPU and dense or MoE model, and any predicted value."""
    sc = {"num_gpus": 8, "seq_length": 4096, "global_batch_size": 8, **job}
    band = pm.band(sc)
    for b in (band.rate(x), band.duration(x)):
        assert b["p10"] <= b["p50"] <= b["p90"]
    assert band.stratum in band_table().strata
