"""How a framework exchanges keys and values under context parallelism: one frozen record per
implementation, looked up by name (``SoftwareStack.cp_comm_type``).

Both implementations here split the sequence into 2 x cp chunks (rank r holds chunks r and
2cp - 1 - r, so every rank has the same causal work) and run one attention kernel per ring step:
step 0 on the local keys under the causal mask, each later step on one rank's keys without it.
They differ in how the keys and values travel and when the compute waits for them, which is all
``perfmodel.formulas.traffic.cp_layer_parts`` asks of them:

``p2p``
    Megatron-Core's ``cp_comm_type="p2p"`` (its default; Transformer Engine
    ``AttnFuncWithCPAndKVP2P``): the K and V chunk of step i + 1 is sent and received while step
    i's kernel runs, so each of the cp - 1 sends hides behind one step; the backward sends the K
    and V again and the dKV chunk, in the 16-bit activation type. The KV sent has the model's kv
    heads (the kernel takes grouped-query attention as is).
``torch_allgather``
    PyTorch's experimental ``context_parallel`` (``torch/distributed/tensor/experimental/
    _attention.py``: ``_ContextParallelOptions.rotate_method = _RotateMethod.ALL_GATHER``, the
    default, with ``convert_to_f32 = True``). ``_AllGatherRotater`` all-gathers every rank's K
    and V once, when step 0 is issued, and the first ``next_buffer()`` waits for it before step
    1: the gather hides only behind step 0's kernel. The backward gathers the K and V again the
    same way (``kv_rotater = _create_rotater(pg, 2)``) and passes the dKV round the ring with
    ``_AllToAllRotater`` (``dkv_rotater``): the float32 accumulators (``grad_key``,
    ``grad_value``, ``accum_dtype = torch.float32``) are sent after every one of the cp steps,
    each hidden behind the next step's kernel, and the last is waited for after the loop
    (``dkv_rotater.next_buffer()`` before the return), with no kernel beside it. torchtitan's
    Llama (9dec370, ``models/llama/model.py`` ``Attention.forward``) repeats K and V to the
    query heads (``repeat_kv``) before ``F.scaled_dot_product_attention``, which the CP
    dispatcher intercepts, so what travels has the query heads. Two stored copies of the file
    (pytorch/pytorch 0123248, 2025, and an earlier form that still offered ``PRE_ALL_GATHER``)
    hold the same rotaters, merge and accumulators; the report's own torch, 1963fc8
    (2024-12-23, benchmarks/llama3_h100_202412_torchtitan.md), was not read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from perfmodel.spec.errors import InputError

CpCommTypeName = Literal["p2p", "torch_allgather"]
CP_COMM_TYPE_CHOICES: tuple[str, ...] = get_args(CpCommTypeName)
FP32_BYTES = 4


@dataclass(frozen=True)
class CpCommType:
    """One context-parallel implementation: every property the traffic formula asks of it."""

    name: str
    source: str
    kv_gathered: bool
    """The K and V of all ranks arrive in one all-gather, waited for after step 0's kernel (so it
    hides only behind 1/cp of the attention); False: a ring send behind every step."""
    kv_query_heads: bool
    """The K and V exchanged have the query heads (repeated before the attention call), not
    the model's kv heads."""
    dkv_bytes_per_element: float | None
    """Bytes per element of the dKV passed round the ring; None = the activation type."""
    dkv_last_hop_exposed: bool
    """The backward's dKV is sent after each of the cp steps and the last send is waited for with
    no kernel beside it; False: cp - 1 sends, each behind a step."""


CP_COMM_TYPES: dict[str, CpCommType] = {
    "p2p": CpCommType(
        name="p2p", source="Megatron-Core cp_comm_type p2p (default); Transformer Engine AttnFuncWithCPAndKVP2P",
        kv_gathered=False, kv_query_heads=False, dkv_bytes_per_element=None, dkv_last_hop_exposed=False),
    "torch_allgather": CpCommType(
        name="torch_allgather",
        source="PyTorch torch/distributed/tensor/experimental/_attention.py: rotate_method ALL_GATHER (default), "
               "convert_to_f32 True, dKV by _AllToAllRotater; torchtitan 9dec370 repeat_kv before SDPA",
        kv_gathered=True, kv_query_heads=True, dkv_bytes_per_element=FP32_BYTES, dkv_last_hop_exposed=True),
}


def cp_comm_type(name: str) -> CpCommType:
    """The record of ``name`` (one of ``CP_COMM_TYPE_CHOICES``)."""
    try:
        return CP_COMM_TYPES[name]
    except KeyError:
        raise InputError("software.cp_comm_type",
                         f"unknown cp_comm_type {name!r}; choose one of {', '.join(CP_COMM_TYPES)}") from None
