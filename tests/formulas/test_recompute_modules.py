"""Megatron-Core recompute modules, block-method full recompute and activation offloading,
checked by hand against the tensors each one frees and the work it redoes."""

import numpy as np
import pytest
import yaml
from support import SW, sw, with_software
from support import spec_predict as predict

from perfmodel.engine.block import block_time
from perfmodel.engine.rules import resolve
from perfmodel.formulas.activations import activation_bytes_per_layer
from perfmodel.formulas.layouts import layouts_from_arrays
from perfmodel.formulas.memory import memory_per_gpu
from perfmodel.formulas.offload import exposed_copy_s, resident_activation_bytes
from perfmodel.formulas.recompute import module_op_shares, recomputed_layer_fraction, selective_recompute_s
from perfmodel.formulas.workload import LayerKind, layer_ops
from perfmodel.spec.errors import InputError
from perfmodel.spec.hardware import HARDWARE_DIR, load_hardware
from perfmodel.spec.model import MlaSpec, ModelSpec, MoeSpec
from perfmodel.spec.scenario import parse_scenario
from perfmodel.studies.search.search import SearchOptions, search

H100 = load_hardware("h100-sxm")
DENSE = ModelSpec(name="dense", num_layers=8, hidden_size=1024, num_attention_heads=8, num_query_groups=8,
                  ffn_hidden_size=4096, gated_mlp=True, vocab_size=32000)
# MLA + MoE with one shared expert and one leading dense layer (DeepSeek-V3's shape, scaled down)
MLA = MlaSpec(q_lora_rank=192, kv_lora_rank=64, qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=32)
MOE = ModelSpec(name="mla-moe", num_layers=4, hidden_size=512, num_attention_heads=8, ffn_hidden_size=1536,
                gated_mlp=True, vocab_size=32000, mla=MLA,
                moe=MoeSpec(num_experts=8, top_k=2, expert_ffn_hidden_size=256, num_shared_experts=1,
                            num_dense_layers=1))
S, B2 = 4096, 2          # sequence length; bf16 bytes


def _layouts(**kw):
    base = dict(tp=1, pp=1, vpp=1, cp=1, ep=1, etp=1, sp=False, zero_stage=0, mbs=1, dp=1, num_mb=1)
    base.update(kw)
    return layouts_from_arrays(**{k: [v] for k, v in base.items()})


def _act(m, kind, modules, precision="bf16", recompute="selective", t=1):
    return float(np.ravel(activation_bytes_per_layer(m, kind, S, 1, t, False, 1, 1, recompute, precision, sw(selective_policy=modules), hidden_dropout=False))[0])


def _scenario(model=DENSE, **kw):
    base = dict(hardware="h100-sxm", num_gpus=8, model=model.model_dump(), seq_length=S,
                global_batch_size=16, micro_batch_size=1)
    base.update(kw)
    return parse_scenario(with_software(base))


# ------------------------------------------------------------------------- memory, by hand
def test_mla_up_proj_frees_q_k_and_v_per_token():
    a, qk, v = 8, 32 + 16, 32
    freed = _act(MOE, LayerKind.MOE, ("core_attn",)) - _act(MOE, LayerKind.MOE, ("mla_up_proj",))
    assert freed == pytest.approx(S * B2 * a * (2 * qk + v))


def test_moe_act_frees_the_fc2_input_of_every_routed_copy():
    for precision, G in (("bf16", 2), ("fp8", 1)):       # fc2 keeps its quantised input under fp8
        freed = _act(MOE, LayerKind.MOE, ("core_attn",), precision) - _act(MOE, LayerKind.MOE, ("moe_act",), precision)
        assert freed == pytest.approx(S * 2 * G * 256)    # top_k copies of the 256-wide expert


def test_layernorm_frees_only_norms_that_are_not_fused_into_a_gemm():
    # dense, non-MLA layer: both norms live inside TE's LayerNorm-Linear modules
    assert _act(DENSE, LayerKind.DENSE, ("layernorm",)) == _act(DENSE, LayerKind.DENSE, ("core_attn",))
    # MLA input norm and MoE pre-MLP norm are standalone: two h-wide outputs
    freed = _act(MOE, LayerKind.MOE, ("core_attn",)) - _act(MOE, LayerKind.MOE, ("layernorm",))
    assert freed == pytest.approx(S * 2 * B2 * 512)
    # the leading dense layer of the MLA model: only the input norm
    freed = _act(MOE, LayerKind.DENSE, ("core_attn",)) - _act(MOE, LayerKind.DENSE, ("layernorm",))
    assert freed == pytest.approx(S * B2 * 512)


def test_mlp_checkpoint_keeps_only_the_layer_input_of_a_dense_mlp():
    f, h = 4096, 1024
    freed = _act(DENSE, LayerKind.DENSE, ("core_attn",)) - _act(DENSE, LayerKind.DENSE, ("mlp",))
    assert freed == pytest.approx(S * B2 * (h + 2 * f + f))   # MLP input; gated activation in; fc2 in
    assert _act(MOE, LayerKind.MOE, ("mlp",)) == _act(MOE, LayerKind.MOE, ("core_attn",))   # dense layers only


def test_shared_experts_and_moe_modules_by_hand():
    sf, E, k, fe, h = 256, 8, 2, 256, 512
    freed = _act(MOE, LayerKind.MOE, ("core_attn",)) - _act(MOE, LayerKind.MOE, ("shared_experts",))
    assert freed == pytest.approx(S * B2 * (2 * sf + sf))
    full_mlp = B2 * h + B2 * E + B2 * 3 * sf + k * (B2 * h + B2 * 2 * fe + B2 * fe + B2 * h)
    freed = _act(MOE, LayerKind.MOE, ("core_attn",)) - _act(MOE, LayerKind.MOE, ("moe",))
    assert freed == pytest.approx(S * (full_mlp - B2 * h))     # the checkpoint keeps its h-wide input


def test_core_attn_string_and_list_are_the_same_policy():
    a = predict(_scenario(recompute="selective", selective_recompute="core_attn"))
    b = predict(_scenario(recompute="selective", selective_recompute=["core_attn"]))
    assert a.step_time_s == b.step_time_s and a.memory_per_gpu_bytes == b.memory_per_gpu_bytes


# --------------------------------------------------------------------------- time, by hand
def _block(m, kind):
    L = _layouts()
    return block_time(layer_ops(m, kind, SW), m, L, S, "bf16", H100, H100.efficiency, SW)


def test_module_recompute_time_is_the_forward_time_of_its_ops():
    blk = _block(MOE, LayerKind.MOE)
    t = {o.name: float(o.fwd_s[0]) for o in blk.ops}

    def redo(mods):
        return float(selective_recompute_s(blk, tuple(mods), MOE, LayerKind.MOE)[0])

    assert redo(["mla_up_proj"]) == pytest.approx(t["attention/q_up"] + t["attention/kv_up"]
                                                  + t["attention/mla_qkv"] + t["mla/latent_norm"])  # inside the checkpoint
    assert redo(["moe_act"]) == pytest.approx(t["mlp/activation"] * 2 / 3)        # top_k 2 of 2 + 1 shared
    assert redo(["shared_experts"]) == pytest.approx(t["moe/shared_up"] + t["moe/shared_down"]
                                                     + t["mlp/activation"] / 3)
    assert redo(["layernorm"]) == pytest.approx(t["norm"])                        # both norms standalone
    assert redo(["moe_act", "shared_experts"]) == pytest.approx(redo(["moe_act"]) + redo(["shared_experts"]))
    assert redo(["moe", "moe_act"]) == pytest.approx(redo(["moe"]))                # moe covers it


def test_moe_recompute_repeats_the_expert_parallel_all_to_alls():
    moe = _scenario(model=MOE, num_gpus=8, parallelism=dict(ep=8), recompute="selective",
                    selective_recompute=["moe"])
    experts = _scenario(model=MOE, num_gpus=8, parallelism=dict(ep=8), recompute="selective",
                        selective_recompute=["moe_act", "shared_experts"])
    assert predict(moe).breakdown_s["recompute"] > predict(experts).breakdown_s["recompute"]
    shares = module_op_shares(("moe",), MOE, LayerKind.DENSE)
    assert shares == {}


def test_block_method_recomputes_n_of_each_chunks_layers():
    L = layouts_from_arrays(**{k: [v, v] for k, v in dict(tp=1, cp=1, ep=1, etp=1, sp=False, zero_stage=0, mbs=1,
                                                           dp=1, num_mb=4).items()}, pp=[2, 2], vpp=[1, 2])
    # 8 layers: 4 per chunk at pp 2, 2 per chunk at pp 2 x vpp 2
    assert recomputed_layer_fraction(DENSE, L, 1).tolist() == [0.25, 0.5]
    assert recomputed_layer_fraction(DENSE, L, 3).tolist() == [0.75, 1.0]
    full = predict(_scenario(recompute="full"))
    half = predict(_scenario(recompute="full", recompute_num_layers=4))
    every = predict(_scenario(recompute="full", recompute_num_layers=8))
    assert half.breakdown_s["recompute"] == pytest.approx(full.breakdown_s["recompute"] / 2)
    assert every.step_time_s == pytest.approx(full.step_time_s)
    assert every.memory_per_gpu_bytes == pytest.approx(full.memory_per_gpu_bytes)
    none = predict(_scenario())
    assert full.memory_per_gpu_bytes < half.memory_per_gpu_bytes < none.memory_per_gpu_bytes


def test_block_method_memory_mixes_stored_and_checkpointed_layers():
    L = _layouts()
    none = memory_per_gpu(DENSE, S, "none", "bf16", L, SW).activations[0]
    full = memory_per_gpu(DENSE, S, "full", "bf16", L, SW).activations[0]
    three = memory_per_gpu(DENSE, S, "full", "bf16", L, sw(recompute_num_layers=3)).activations[0]
    per_none = _act(DENSE, LayerKind.DENSE, "core_attn", recompute="none")
    per_full = _act(DENSE, LayerKind.DENSE, "core_attn", recompute="full")
    # 3 of 8 layers keep their input only, 5 keep everything, one layer is rebuilt at a time
    rebuild = per_none - per_full
    assert three - none == pytest.approx(3 * (per_full - per_none) + rebuild)
    assert full - none == pytest.approx(8 * (per_full - per_none) + rebuild)


# --------------------------------------------------------------------------- offloading
def test_offload_keeps_the_unoffloaded_layers_and_one_reloaded_layer():
    per = {LayerKind.DENSE: np.array([10.0])}
    assert resident_activation_bytes(DENSE, 3, per)[0] == (8 - 3 + 1) * 10.0
    per = {LayerKind.DENSE: np.array([100.0]), LayerKind.MOE: np.array([10.0])}
    assert resident_activation_bytes(MOE, 1, per)[0] == 3 * 10.0 + 100.0      # the dense layer is offloaded
    assert resident_activation_bytes(MOE, 2, per)[0] == 2 * 10.0 + 100.0


def test_offload_memory_against_no_offload():
    L = _layouts()
    none = memory_per_gpu(DENSE, S, "none", "bf16", L, SW)
    off = memory_per_gpu(DENSE, S, "none", "bf16", L, sw(activation_offload_layers=5))
    per = _act(DENSE, LayerKind.DENSE, "core_attn", recompute="none")
    assert none.activations[0] - off.activations[0] == pytest.approx(4 * per)
    assert off.weights[0] == none.weights[0]


def test_offload_copies_hide_behind_their_window_of_layers():
    # 8 layers, 4 offloaded: each copy overlaps 2 layers of forward, then 2 of backward
    assert exposed_copy_s(4, 8, 1.0, 0.6, 1.2)[()] == 0.0
    assert exposed_copy_s(4, 8, 1.5, 0.6, 1.2)[()] == pytest.approx(4 * (1.5 - 1.2))
    assert exposed_copy_s(4, 8, 3.0, 0.6, 1.2)[()] == pytest.approx(4 * ((3.0 - 1.2) + (3.0 - 2.4)))


def _slow_host_link(tmp_path, gb_per_s):
    """An inline hardware spec: the H100's with a slower host link."""
    data = yaml.safe_load((HARDWARE_DIR / "h100-sxm.yaml").read_text())
    data["id"] = f"h100-host-{gb_per_s}"
    data["host_link"]["bandwidth_per_direction_gb_per_s"] = gb_per_s
    return data


def test_offload_time_appears_when_the_host_link_is_slow_and_shrinks_as_it_grows(tmp_path):
    def run(hw, n):
        return predict(_scenario(hardware=hw, num_gpus=1, global_batch_size=4, micro_batch_size=4,
                                 activation_offload_layers=n))

    slow, slower = run(_slow_host_link(tmp_path, 4), 6), run(_slow_host_link(tmp_path, 2), 6)
    assert 0 < slow.breakdown_s["offload"] < slower.breakdown_s["offload"]
    assert slow.step_time_s == pytest.approx(sum(slow.breakdown_s.values()))
    assert run("h100-sxm", 0).breakdown_s["offload"] == 0.0
    assert slow.memory_per_gpu_bytes < run("h100-sxm", 0).memory_per_gpu_bytes


# ---------------------------------------------------------------------------- input checks
@pytest.mark.parametrize("kw, field, words", [
    (dict(selective_recompute=["mla_up_proj"]), "software.selective_recompute", "multi-latent"),
    (dict(selective_recompute=["moe_act"]), "software.selective_recompute", "MoE"),
    (dict(selective_recompute=[]), "software.selective_recompute", "empty"),
    (dict(recompute="selective", recompute_num_layers=2), "software.recompute_num_layers", "full"),
    (dict(activation_offload_layers=8), "software.activation_offload_layers", "less than"),
    (dict(activation_offload_layers=2, recompute="full"), "software.activation_offload_layers", "recompute"),
    (dict(activation_offload_layers=2, parallelism=dict(pp=2)), "parallelism.pp", "pp = 1"),
])
def test_recompute_and_offload_input_errors_name_the_field(kw, field, words):
    with pytest.raises(InputError) as e:
        resolve(_scenario(**kw))
    assert e.value.field == field and words in str(e.value) and "\n" not in str(e.value)


def test_search_with_offload_tries_only_unpipelined_layouts_without_recompute():
    sc = _scenario(num_gpus=8, global_batch_size=32, activation_offload_layers=2)
    res = search(sc, SearchOptions(top_k=50))
    assert len(res.table) > 0 and (res.table.layouts.pp == 1).all() and set(res.table.recompute) == {"none"}
    assert all(c.scenario.parallelism.pp == 1 and c.scenario.recompute == "none" for c in res.candidates)
