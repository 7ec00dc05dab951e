"""The 100-trillion-parameter presets (issue 37): their sizes by hand, inside every bound."""

import pytest

from perfmodel.formulas.counts import param_count
from perfmodel.spec.presets import load_model


def test_dense_100t_is_the_megatron_family_shape_at_100t():
    """GPT family (Narayanan et al. 2021 Table 1: MHA, 4h MLP, tied embeddings, no biases
    counted): 12 L h^2 + (2L + 1) h of layer norms + V h = 12 * 416 * 141,312^2 + 833 * 141,312
    + 51,200 * 141,312 = 99.693T."""
    m = load_model("gpt-100t")
    L, h, V = 416, 141_312, 51_200
    assert (m.num_layers, m.hidden_size, m.vocab_size) == (L, h, V)
    assert param_count(m).total == pytest.approx(12 * L * h**2 + (2 * L + 1) * h + V * h, rel=1e-9)


def test_moe_100t_is_the_deepseek_v3_layout_at_100t():
    """224 layers of MHA (4 h^2); 3 dense with a gated MLP 3 h f (f = 115,840); 221 MoE layers
    of 257 gated experts 3 h f_e (f_e = 12,872) and a router h * 256; untied embeddings 2 V h;
    (2L + 1) h of norms. Active: 8 routed + 1 shared expert per MoE layer."""
    m = load_model("moe-100t")
    L, h, f, fe, V = 224, 45_056, 115_840, 12_872, 129_280
    common = L * 4 * h**2 + 3 * 3 * h * f + 221 * 256 * h + 2 * V * h + (2 * L + 1) * h
    c = param_count(m)
    assert c.total == pytest.approx(common + 221 * 257 * 3 * h * fe, rel=1e-9)
    assert c.active == pytest.approx(common + 221 * 9 * 3 * h * fe, rel=1e-9)
    assert 0.05 < c.active / c.total < 0.056        # DeepSeek-V3's share: 37 / 671 = 0.055


def test_100t_answers_print_in_years_and_trillions():
    """A 100T run takes centuries and trillions of dollars on today's GPUs: 317,280.4 days print
    as 869 years (/ 365.25), $9.06e12 as $9.06T, $8.75e11 as $875.05B; shorter times keep days."""
    from perfmodel.present import fmt
    assert fmt.seconds(317_280.4 * 86400) == "869 years"
    assert fmt.seconds(500 * 86400) == "500.0 d"
    assert fmt.usd(9.06e12) == "$9.06T" and fmt.usd(875.05e9) == "$875.05B" and fmt.usd(23.77e6) == "$23.77M"
