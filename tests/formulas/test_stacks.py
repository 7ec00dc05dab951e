"""Named software stacks (perfmodel/data/stacks.yaml): each preset loads, sets what its sources
say, and a scenario that names one may override any option."""

import pytest

from perfmodel.spec.errors import InputError
from perfmodel.spec.scenario import parse_scenario, scenario_to_dict
from perfmodel.spec.software import SoftwareStack, software_to_dict
from perfmodel.spec.stacks import PER_JOB_OPTIONS, list_stacks, stack_info, stack_options, stack_sources

JOB = {"name": "j", "hardware": "h100-sxm", "num_gpus": 8, "model": "llama3-8b", "seq_length": 4096,
       "global_batch_size": 16}

CITED = {
    "megatron-core": {},
    "nemo-perf": {"grad_reduce_in_fp32": False, "te_module_host_ops": 2.69},
    "megatron-bridge-perf": {"grad_reduce_in_fp32": False, "moe_dispatcher": "alltoall", "moe_router_fusion": True,
                             "moe_permute_fusion": True, "te_module_host_ops": 1.0},
    **{f"megatron-bridge-{release}": {"grad_reduce_in_fp32": False, "moe_router_fusion": True, "moe_permute_fusion": True,
                                      "te_module_host_ops": te} for release, te in
       (("25.09", 2.69), ("25.11", 2.69), ("26.04", 1.0), ("26.06", 1.0))},
    "megatron-lm-2021": {"attention_backend": "unfused", "attention_dropout": True, "overlap.dp": 0.0, "overlap.pp": 0.0,
                         "overlap.tp": 0.0},
    "deepspeed-zero3-2021": {"attention_backend": "unfused", "fsdp_collectives_per_layer": 12, "fsdp_list_api": True,
                             "overlap.fsdp": 0.0, "grad_reduce_in_fp32": False},
    "deepspeed-zero3": {"elementwise_kernels": "eager", "cross_entropy": "eager_fp32", "fsdp_collectives_per_layer": 9,
                        "grad_reduce_in_fp32": False},
    "maxtext": {"selective_recompute": "save_qkv_proj", "elementwise_kernels": "fused", "grad_reduce_in_fp32": True,
                "fp8_casts": "fused", "attention_backend": "cudnn"},
    "torchtitan-eager": {"elementwise_kernels": "eager", "cross_entropy": "eager_fp32", "selective_recompute": "op_sac",
                         "grad_reduce_in_fp32": True, "overlap.tp": 0.0, "optimizer_kernels": "fused",
                         "fsdp_copy_kernels": True, "pp_grad_reduce": "stage_drain", "fsdp_root_group": True},
    "torchtitan-2412-eager": {"elementwise_kernels": "eager", "cross_entropy": "eager_fp32",
                              "selective_recompute": "op_sac", "optimizer_kernels": "foreach",
                              "cp_comm_type": "torch_allgather", "fsdp_copy_kernels": True,
                              "pp_grad_reduce": "stage_drain", "fsdp_root_group": True},
    "torchtitan-compile": {"elementwise_kernels": "compiled", "cross_entropy": "fused",
                           "selective_recompute": "op_sac", "fsdp_copy_kernels": True,
                           "pp_grad_reduce": "stage_drain", "fsdp_root_group": True},
    "torchtitan-2412-compile": {"elementwise_kernels": "compiled", "cross_entropy": "eager_fp32",
                                "selective_recompute": "op_sac", "optimizer_kernels": "foreach",
                                "cp_comm_type": "torch_allgather", "fsdp_copy_kernels": True,
                                "pp_grad_reduce": "stage_drain", "fsdp_root_group": True},
    "pytorch-fsdp-accelerate": {"elementwise_kernels": "eager", "cross_entropy": "eager_fp32",
                                "grad_reduce_in_fp32": False, "overlap.fsdp": 0.0, "optimizer_kernels": "foreach"},
    "pytorch-eager": {"elementwise_kernels": "eager", "cross_entropy": "eager_fp32", "grad_reduce_in_fp32": True,
                      "overlap.dp": 1.0, "optimizer_kernels": "foreach"},
    "deepseek-v3": {"moe_dispatcher": "flex", "moe_dispatch_fp8": True, "moe_comm_reserved_sms": 20,
                    "moe_probs_in_activation": True, "moe_fp8_activation_cache": True, "optimizer_moments": "bf16",
                    "selective_recompute": ["layernorm", "mla_up_proj", "moe_act"], "grad_reduce_in_fp32": True,
                    "fp8_scaling": "blockwise", "attention_backend": "fa3"},
}
"""What each preset's sources say, option by option (the sources are in stacks.yaml):
Megatron-LM v2 train_step all-reduces after the backward and waits on every pipeline transfer;
DeepSpeed v0.3.14 issues one collective per parameter tensor (12 in a GPT layer) through the list
API with a synchronize before each gather, and reduces in the 16-bit dtype; a Hugging Face Llama
decoder layer has 9 parameter-holding sub-modules; dgxc 1b9bb6b maxtext/configure.sh sets
remat_policy save_qkv_proj; torchtitan's mixed_precision_reduce defaults to float32, its Llama 3 8B
config asks for op-level checkpointing, FSDP2 copies every gathered unit out of its flat buffer, 9dec370 runs the loss eagerly and a foreach AdamW, e7c0cae
compiles the loss with the blocks and defaults to the fused AdamW, and 9dec370's context parallelism
is PyTorch's experimental one at its default all-gather rotate method, and its pipeline stages
(torch.distributed.pipelining over FSDP2) reduce their gradients after their last backward, while
FSDP2's root group (embedding, output layer) is not resharded after the forward; Accelerate's FSDP plugin reduces
in the mixed-precision dtype with no backward prefetch and torch.optim.AdamW defaults to foreach;
Megatron-LM's attention dropout defaults to 0.1; NVIDIA's performance recipes set
grad_reduce_in_fp32 = False, and Megatron-Bridge's set the MoE router and permute fusions; a
Transformer Engine Linear cost the host 99.66 us against 37.08 for torch.nn.Linear (TE issue #2053,
2.69x) until TE 2.10, so the containers with TE 2.9 or older (NeMo 25.02-25.11) pay it and 26.04's
TE 2.14 and 26.06's TE 2.16 do not."""


def _flat(sw: SoftwareStack) -> dict:
    d = sw.model_dump(mode="json", exclude={"stack"})
    ov = d.pop("overlap")
    return {**d, **{f"overlap.{k}": v for k, v in ov.items()}}


def test_every_preset_loads_and_cites_a_source_for_every_option():
    assert list_stacks()[0] == "megatron-core"
    assert set(list_stacks()) == set(CITED)
    for name in list_stacks():
        sw = SoftwareStack(stack=name)
        assert sw.stack == name
        assert stack_info(name)["label"] and stack_info(name)["release"]
        options = stack_options(name)
        assert not set(options) & set(PER_JOB_OPTIONS), name
        sources = stack_sources(name)
        flat_keys = [k for k in options if k != "overlap"] + [f"overlap.{k}" for k in options.get("overlap", {})]
        assert sorted(sources) == sorted(flat_keys), name
        assert all(len(s) > 20 for s in sources.values()), name


@pytest.mark.parametrize("name", sorted(CITED))
def test_preset_options_match_the_cited_defaults(name):
    flat = _flat(SoftwareStack(stack=name))
    for key, value in CITED[name].items():
        assert flat[key] == value, (name, key)


def test_the_default_stack_is_megatron_core():
    """No stack named = every option at its default = the megatron-core preset."""
    assert _flat(SoftwareStack()) == _flat(SoftwareStack(stack="megatron-core"))


def test_options_beside_the_stack_override_it_and_overlap_merges_kind_by_kind():
    sw = SoftwareStack.model_validate({"stack": "torchtitan-eager", "cross_entropy": "fused",
                                       "overlap": {"dp": 0.5}})
    assert sw.cross_entropy == "fused"                      # overridden
    assert sw.elementwise_kernels == "eager"                # from the stack
    assert sw.overlap.dp == 0.5 and sw.overlap.fsdp == 1.0 and sw.overlap.tp == 0.0
    ds = SoftwareStack.model_validate({"stack": "deepspeed-zero3-2021", "overlap": {"dp": 0.0}})
    assert ds.overlap.fsdp == 0.0 and ds.overlap.dp == 0.0   # the preset's fsdp kind survives


def test_a_scenario_names_a_stack_and_round_trips_with_its_overrides_only():
    sc = parse_scenario({**JOB, "software": {"stack": "megatron-lm-2021", "overlap": {"tp": None}}})
    assert sc.software.attention_backend == "unfused" and sc.software.overlap.tp is None
    d = scenario_to_dict(sc)
    assert d["software"] == {"stack": "megatron-lm-2021", "overlap": {"tp": None}}
    assert parse_scenario(d) == sc
    assert software_to_dict(SoftwareStack()) == {}
    assert software_to_dict(SoftwareStack(cross_entropy="eager_fp32")) == {"cross_entropy": "eager_fp32"}


def test_an_unknown_stack_is_one_line_naming_the_field():
    with pytest.raises(InputError) as exc:
        parse_scenario({**JOB, "software": {"stack": "megatron-9000"}})
    text = str(exc.value)
    assert "\n" not in text and "software" in text and "megatron-9000" in text and "megatron-core" in text
    with pytest.raises(InputError):
        parse_scenario({**JOB, "software": {"stack": 3}})
