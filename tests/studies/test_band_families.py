"""Out-of-family error bands (issue 49): the model family of a job, the widening of a band for a job
outside the validated runs, its one-line note, and the nested held-out coverage table."""

from pathlib import Path

import pytest

import perfmodel as pm
from perfmodel.engine.band import (
    Context,
    Validated,
    CATEGORIES,
    band_table_from_dict,
    category_spread,
    combined_widening,
    family_of,
    novel_dimensions,
    out_of_family,
    widen,
)
from perfmodel.engine.band_mixture import shifted, spread
from perfmodel.studies.observed.band_families import (
    SCHEMES,
    excess_variance,
    fit_spreads,
    fit_widening,
    group_deviation,
    held_out_nested,
    out_of_family_table,
)
from perfmodel.studies.observed.bands import LEVELS, Residual, parts, residuals

RUNS = Path(__file__).resolve().parents[2] / "perfmodel" / "data" / "published_runs.yaml"


@pytest.fixture(scope="module")
def rows():
    return residuals(pm.validate(RUNS))


@pytest.mark.parametrize("preset, family", [("llama3-70b", "dense"), ("mixtral-8x7b", "moe-coarse"),
                                            ("deepseek-v3", "moe-fine"), ("qwen3-235b-a22b", "moe-fine")])
def test_family_follows_expert_granularity(preset, family):
    """G = 4 d_model / d_expert (Krajewski et al. 2024): Mixtral 1.14 coarse, DeepSeek-V3 14 fine."""
    assert family_of(pm.model(preset)) == family


def test_widening_adds_in_quadrature_and_keeps_the_median():
    factors = {"seq_length": 1.2, "scale": 1.45}
    assert combined_widening(factors, ()) == 1.0
    assert combined_widening(factors, ("seq_length", "stack")) == pytest.approx(1.2)     # categories shift instead
    assert combined_widening(factors, ("seq_length", "scale")) == pytest.approx((1 + 0.44 + 1.45 ** 2 - 1) ** 0.5)
    q = [0.01 * i for i in range(len(LEVELS))]
    w = widen(LEVELS, q, 2.0)
    assert w[LEVELS.index(0.5)] == pytest.approx(q[LEVELS.index(0.5)])
    assert w[-1] - w[0] == pytest.approx(2 * (q[-1] - q[0]))


def test_held_out_offsets_move_and_spread_the_band():
    """r + c over every pair: one offset moves the band by it; two offsets a and -a spread it."""
    q = tuple(0.01 * (i - 9) for i in range(len(LEVELS)))
    assert shifted(LEVELS, q, ()) == pytest.approx(q)
    assert shifted(LEVELS, q, (0.2,)) == pytest.approx(tuple(x + 0.2 for x in q))
    wide = shifted(LEVELS, q, (-0.05, 0.05))
    assert wide[LEVELS.index(0.5)] == pytest.approx(0.0, abs=1e-12)
    assert wide[0] < q[0] - 0.02 and wide[-1] > q[-1] + 0.02
    both = out_of_family(LEVELS, q, ("stack", "seq_length"), {"stack": 0.2}, {"seq_length": 2.0})
    assert both == pytest.approx(widen(LEVELS, spread(LEVELS, q, 0.2), 2.0))


def test_a_random_offset_adds_a_normal_spread():
    """A narrow band (about uniform on +-0.036, variance about 0.0005) plus c ~ N(0, 0.2^2) is
    nearly that normal: p90 = 1.2816 sqrt(0.04 + 0.0005) = 0.258; the median stays 0."""
    q = tuple(0.004 * (i - 9) for i in range(len(LEVELS)))
    assert spread(LEVELS, q, 0.0) == pytest.approx(q)
    s = spread(LEVELS, q, 0.2)
    assert s[LEVELS.index(0.5)] == pytest.approx(0.0, abs=1e-9)
    assert s[LEVELS.index(0.9)] == pytest.approx(0.258, rel=0.02)
    assert s[LEVELS.index(0.1)] == pytest.approx(-0.258, rel=0.02)
    assert category_spread({"stack": 0.3, "family": 0.4}, ("stack", "family", "seq_length")) == pytest.approx(0.5)
    assert category_spread({"stack": 0.3}, ("seq_length",)) == 0.0


def test_the_excess_variance_is_the_mean_of_m_squared_less_v():
    """tau^2 = max(0, mean(m^2 - V)): (0.09 - 0.01 + 0.01 - 0.03) / 2 = 0.03; below 0 it is 0."""
    assert excess_variance([(0.3, 0.01), (-0.1, 0.03)]) == pytest.approx(0.03)
    assert excess_variance([(0.1, 0.02)]) == 0.0
    assert excess_variance([]) == 0.0


def test_a_groups_deviation_counts_a_unit_as_one_draw_of_the_offset():
    """Band: unit A (runs 0.0, 0.2: offset 0.1, e = -0.1, +0.1), unit B (one run 0.3): mean 0.5 / 3,
    var_b = (2 (0.1 - 1/6)^2 + (0.3 - 1/6)^2) / 3 = 0.0088889, var_e = 0.01. Held out: one unit of two
    runs at 0.5 and 0.3: m = 0.4 - 1/6, V = 1^2 var_b + 2 var_e / 2^2 = 0.0138889."""
    def run(i, source, r):
        return Residual(f"{source}{i}", source, "h100-sxm", "hopper", "dense", r, "s")
    p = parts([run(0, "A", 0.0), run(1, "A", 0.2), run(0, "B", 0.3)])
    m, v = group_deviation([run(0, "C", 0.5), run(1, "C", 0.3)], p)
    assert m == pytest.approx(0.4 - 1 / 6)
    assert v == pytest.approx(0.0088889 + 0.005, abs=1e-7)


def test_novel_dimensions_name_what_lies_outside():
    v = Validated(frozenset({"nemo-perf"}), frozenset({"dense"}), frozenset({"hopper"}), (2048, 8192), (8, 1024))
    assert novel_dimensions(Context("nemo-perf", "dense", "hopper", 4096, 64), v) == ()
    assert novel_dimensions(Context("pytorch-eager", "moe-fine", "any", 131072, 4096), v) == (
        "stack", "family", "generation", "seq_length", "scale")


def _table(tmp_oof=True):
    levels = [round(0.05 * k, 2) for k in range(1, 20)]
    data = {"format": "perfmodel-error-bands/1", "levels": levels,
            "strata": {f"{g}/{k}": {"software_stacks": 3, "held_out_coverage": 0.8,
                                    "log_ratio": [0.01 * (i - 9) for i in range(19)]}
                       for g in ("hopper", "any") for k in ("dense", "moe")}}
    if tmp_oof:
        data["out_of_family"] = {"validated": {"stacks": ["nemo-perf"], "families": ["dense"], "generations": ["hopper"],
                                               "seq_length": [2048, 8192], "num_gpus": [8, 1024]},
                                 "spread": {"stack": 0.2, "family": 0.3, "generation": 0.0},
                                 "widening": {"seq_length": 1.3, "scale": 1.0},
                                 "poor_coverage": {"family": {"moe-fine": {"runs": 42, "coverage": 0.2857}}}}
    return band_table_from_dict(data)


def test_a_job_of_an_unseen_stack_gets_a_wider_band_and_says_why(monkeypatch):
    import perfmodel.engine.band as band
    monkeypatch.setattr(band, "band_table", lambda: _table())
    hw, dense = pm.hardware("h100-sxm"), pm.model("llama3-70b")
    seen = band.band_for_job(hw, dense, "nemo-perf", 4096, 64)
    unseen = band.band_for_job(hw, dense, "pytorch-eager", 4096, 64)
    assert seen.widening == 1.0 and "among the validated runs" in seen.note
    assert unseen.widening > 1.5
    assert "stack pytorch-eager (validated: nemo-perf)" in unseen.note and "\n" not in unseen.note
    s, u = seen.duration(10.0), unseen.duration(10.0)
    assert u["p10"] < s["p10"] and u["p90"] > s["p90"]
    moe = band.band_for_job(hw, pm.model("deepseek-v3"), "nemo-perf", 4096, 64)
    assert moe.widening > 1.5 and "model family moe-fine" in moe.note      # widened about the same median
    assert moe.quantile(0.5) == pytest.approx(seen.quantile(0.5), abs=1e-9)
    assert "held out whole, model family moe-fine's 42 runs were 29% inside the 80% band" in moe.note
    assert "held out whole" not in seen.note
    long = band.band_for_job(hw, dense, "nemo-perf", 131072, 64)
    assert long.widening == pytest.approx(1.3) and "sequence length 131072 (validated 2048-8192)" in long.note
    outside = band.band_for_job(pm.hardware("mi300x"), pm.model("deepseek-v3"), "pytorch-eager", 4096, 64)
    assert outside.stratum == "any/moe" and outside.note.startswith("band from any/moe runs (model family moe-fine)")
    assert all(x in outside.note for x in ("stack pytorch-eager", "model family moe-fine (validated: dense)",
                                          "GPU generation cdna3 (validated: hopper)"))
    monkeypatch.setattr(band, "band_table", lambda: _table(False))
    assert "refit with --fit-bands" in band.band_for_job(hw, dense, "nemo-perf", 4096, 64).note


def test_a_custom_profile_says_it_has_no_residuals():
    p = pm.predict(pm.load_scenario("perfmodel/data/example_scenario.yaml"), profile=None)
    assert "no residuals of their own" in p.band_note
    assert "no residuals" not in pm.predict(pm.load_scenario("perfmodel/data/example_scenario.yaml")).band_note


def test_nested_coverage_fits_the_spreads_without_the_held_out_group(rows):
    """A held-out stack's runs get the band, spreads and factors fitted on the other stacks alone."""
    from perfmodel.studies.observed.band_families import _base_band
    stack = "torchtitan-2412-compile"
    held = held_out_nested(rows, "stack")
    rest = [r for r in rows if r.stack != stack]
    spreads, factors = fit_spreads(rest), fit_widening(rest)
    assert set(spreads) == set(CATEGORIES) and all(x >= 0.0 for x in spreads.values())
    p = parts(rest)
    for r in rows:
        if r.stack == stack:
            h = held[r.id]
            assert "stack" in h.novel
            assert h.quantiles == pytest.approx(out_of_family(LEVELS, _base_band(p, r), h.novel, spreads, factors))
    assert set(factors) == {"seq_length", "scale"} and all(k >= 1.0 for k in factors.values())


def test_out_of_family_table_covers_every_scheme(rows):
    table = out_of_family_table(rows)
    assert set(table) == set(SCHEMES)
    for scheme, groups in table.items():
        assert groups["all"]["cases"] == len(rows), scheme
        for c in groups.values():
            assert c[0.5] <= c[0.8] <= c[0.9] and c["median_half_width"] > 0


def test_validation_report_shows_the_out_of_family_table():
    from perfmodel.present.validation_report import markdown
    text = markdown(pm.validate(RUNS))
    assert "### Out of family" in text and "| model family | moe-fine |" in text


def test_the_band_note_names_a_family_the_band_covered_poorly_held_out():
    """Fine-grained MoE runs held out as a family sit outside the others' band (the model's bias,
    issue 49): a job of that family says so, with the committed table's figures; a dense job does not."""
    from perfmodel.engine.band import band_for_job, band_table
    poor = band_table().poor
    runs, cov = poor["family"]["moe-fine"]
    hw = pm.hardware("h100-sxm")
    note = band_for_job(hw, pm.model("deepseek-v3"), "megatron-core", 4096, 256).note
    assert f"held out whole, model family moe-fine's {runs} runs were {cov:.0%} inside the 80% band" in note
    assert cov < 0.7 and "held out whole" not in band_for_job(hw, pm.model("llama3-70b"), "nemo-perf", 8192, 64).note
