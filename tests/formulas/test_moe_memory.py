"""Memory of real MoE recipes: BF16 Adam moments, FP8-cached SwiGLU inputs, router probabilities
applied on the expert side, each checked by hand; and DeepSeek-V3's published H800 layout with
the options its report names (arXiv 2412.19437 secs. 3.2-3.3)."""

from pathlib import Path

import numpy as np
import pytest
from support import sw

import perfmodel as pm
from perfmodel.formulas.activations import activation_bytes_per_layer
from perfmodel.formulas.model_states import stack_state_bytes_per_param
from perfmodel.formulas.overheads import optimizer_bytes_per_param
from perfmodel.formulas.workload import LayerKind
from perfmodel.spec.model import ModelSpec, MoeSpec
from perfmodel.spec.units import GIBI

DATA = Path(__file__).resolve().parents[2] / "perfmodel" / "data"
MOE = ModelSpec(name="moe", num_layers=2, hidden_size=1024, num_attention_heads=8, ffn_hidden_size=4096,
                gated_mlp=True, vocab_size=32000, moe=MoeSpec(num_experts=8, top_k=2, expert_ffn_hidden_size=512))
S = 4096                                     # tokens per micro-batch (mbs 1, no TP/CP)


def _act(stack, precision="fp8"):
    return float(activation_bytes_per_layer(MOE, LayerKind.MOE, S, 1, 1, False, 1, 1, "none", precision, stack, hidden_dropout=False))


def test_bf16_moments_by_hand():
    """Mixed-precision Adam: fp32 master 4 + m 4 + v 4 = 12 bytes; with bf16 moments 4 + 2 + 2 = 8.
    The fused step reads and writes m and v: 30 bytes per parameter, 8 fewer with bf16 moments."""
    assert stack_state_bytes_per_param("fp8", sw()) == (2, 4, 12)
    assert stack_state_bytes_per_param("fp8", sw(optimizer_moments="bf16")) == (2, 4, 8)
    assert stack_state_bytes_per_param("bf16", sw(optimizer_moments="bf16", grad_reduce_in_fp32=False)) == (2, 2, 8)
    assert optimizer_bytes_per_param(sw()) == 30
    assert optimizer_bytes_per_param(sw(optimizer_moments="bf16")) == 22


def test_fp8_swiglu_cache_by_hand():
    """The SwiGLU input of each routed copy is 2 x 512 wide: cached in FP8 it takes 1 byte per element
    instead of 2, top_k 2 x 1024 x 1 = 2,048 bytes per token fewer."""
    saved = _act(sw()) - _act(sw(moe_fp8_activation_cache=True))
    assert saved == pytest.approx(S * 2 * 2 * 512 * 1, rel=1e-12)


def test_probs_in_activation_by_hand():
    """Weighing the experts' SwiGLU output instead of their h-wide output frees the 1024-wide bf16
    expert output of each routed copy: 2 x 1024 x 2 = 4,096 bytes per token."""
    saved = _act(sw()) - _act(sw(moe_probs_in_activation=True))
    assert saved == pytest.approx(S * 2 * 1024 * 2, rel=1e-12)


def test_dense_layers_ignore_the_moe_options():
    on = sw(moe_fp8_activation_cache=True, moe_probs_in_activation=True)
    dense = [float(activation_bytes_per_layer(MOE, LayerKind.DENSE, S, 1, 1, False, 1, 1, "none", "fp8", s, hidden_dropout=False))
             for s in (sw(), on)]
    assert dense[0] == dense[1]


def _stage_totals_gib(scenario) -> list[float]:
    st = pm.stage_memory(scenario)
    return [sum(stage.values()) / GIBI for stage in st.stages]


def test_deepseek_v3_h800_fits_with_the_report_options():
    """DeepSeek-V3 on 2,048 H800 (PP16 DualPipe, EP64, TP1, ZeRO-1, FP8, 1 x 4096): every rank fits
    in the H800's 79.1 GiB with the deepseek-v3 stack (BF16 moments, FP8 SwiGLU inputs, SwiGLU
    output, RMSNorm and MLA up-projections recomputed, probabilities on the expert side); on
    Megatron-Core's defaults with the same recompute modules the inner ranks do not."""
    sc = pm.load_scenario(DATA / "deepseek_v3_h800.yaml")
    usable_gib = pm.hardware("h800-sxm").gpu.hbm_usable_gib
    per_rank = _stage_totals_gib(sc)
    assert len(per_rank) == 16
    assert max(per_rank) < usable_gib, per_rank
    assert pm.predict(sc).fits_in_memory
    plain = sc.model_dump(mode="json")
    plain["software"] = {"selective_recompute": ["layernorm", "mla_up_proj", "moe_act"],
                         "pipeline_layout": sc.software.pipeline_layout}
    plain_ranks = _stage_totals_gib(pm.load_scenario(plain))
    assert min(plain_ranks[1:-1]) > usable_gib, plain_ranks
    assert np.all(np.array(plain_ranks) > np.array(per_rank))


def test_dualpipe_rank_holds_both_ends_of_a_layout():
    """Under DualPipe rank r holds stages r and pp - 1 - r: with the layout Et*3|(t*4|)*14t*2mL the
    end ranks hold 3 + 2 decoder layers, the embedding, the head and the MTP module; the inner
    ranks 4 + 4. The two end ranks are mirror images and hold the same memory."""
    sc = pm.load_scenario(DATA / "deepseek_v3_h800.yaml")
    per_rank = _stage_totals_gib(sc)
    assert per_rank[0] == pytest.approx(per_rank[-1], rel=1e-9)
    assert per_rank[1:-1] == pytest.approx([per_rank[1]] * 14, rel=1e-9)


def test_mirrored_load_is_the_mean_of_both_directions():
    """pipeline_layout.mirrored: rank r runs stage r and stage pp - 1 - r for half the micro-batches
    each; the mean keeps the layout's total."""
    from perfmodel.spec.pipeline_layout import mirrored, parse, rank_load
    load = rank_load(parse("Et*3|(t*4|)*2t*2mL"), 4)
    two = mirrored(load)
    assert list(load.decoder) == [3, 4, 4, 2]
    assert list(two.decoder) == [2.5, 4, 4, 2.5]
    assert list(two.mtp) == [0.5, 0, 0, 0.5] and list(two.loss) == [0.5, 0, 0, 0.5]
    assert two.decoder.sum() == load.decoder.sum()


def test_bad_moe_inputs_are_one_line_errors():
    """More reserved SMs than the GPU has, and a group limit that does not split the experts, are
    refused naming the field."""
    from perfmodel.spec.errors import InputError
    sc = pm.load_scenario(DATA / "deepseek_v3_h800.yaml").model_dump(mode="json")
    sc["software"]["moe_comm_reserved_sms"] = 132
    with pytest.raises(InputError, match="software.moe_comm_reserved_sms"):
        pm.predict(sc)
    model = dict(MOE.model_dump(mode="json"))
    model["moe"] = dict(model["moe"], router_num_groups=3, router_group_topk=1)
    with pytest.raises(ValueError, match="router_num_groups"):
        ModelSpec(**model)
