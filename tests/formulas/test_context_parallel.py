"""Context-parallel traffic by implementation, by hand (``perfmodel.spec.context_parallel``):
Megatron-Core's p2p ring against PyTorch's experimental context_parallel as torchtitan's end-of-2024
report ran it (one K/V all-gather behind step 0, query-head K/V, a float32 dKV ring whose last hop
is exposed)."""

import numpy as np
import pytest
from support import sw

from perfmodel.formulas.comm import scale_out_fabric, scale_up_fabric
from perfmodel.formulas.layouts import layouts_from_arrays
from perfmodel.formulas.overlap import exposed_s
from perfmodel.formulas.traffic import cp_kv_chunk_bytes, cp_layer_parts
from perfmodel.spec.context_parallel import CP_COMM_TYPES, cp_comm_type
from perfmodel.spec.errors import InputError
from perfmodel.spec.hardware import load_hardware
from perfmodel.spec.presets import load_model
from perfmodel.spec.profile import efficiencies_for
from perfmodel.spec.software import SoftwareStack

LLAMA_405B = load_model("llama3-405b")      # 128 query heads, 8 kv heads of 128
LLAMA_8B = load_model("llama3-8b")          # 32 query heads, 8 kv heads of 128
H100_500W = load_hardware("h100-sxm-hbm2e-500w")
TORCH = sw(cp_comm_type="torch_allgather")
P2P = sw(cp_comm_type="p2p")


def _layouts(tp, cp):
    return layouts_from_arrays(**{k: [v] for k, v in dict(tp=tp, pp=1, vpp=1, cp=cp, ep=1, etp=1, sp=tp > 1,
                                                          zero_stage=1, mbs=1, dp=1, num_mb=1).items()})


def test_chunk_has_query_heads_under_torchtitan():
    """405B at 256K tokens, tp 8, cp 8: T = 32,768 tokens per GPU. p2p sends the one kv head a TP
    rank holds, 32768 * 2 * 1 * 128 * 2 B = 16 MiB; torchtitan repeats K and V to the 128 / 8 = 16
    query heads first, 32768 * 2 * 16 * 128 * 2 B = 256 MiB, 16 times as much."""
    L = _layouts(8, 8)
    assert float(cp_kv_chunk_bytes(LLAMA_405B, L, 262144, P2P)[0]) == 32768 * 2 * 1 * 128 * 2
    assert float(cp_kv_chunk_bytes(LLAMA_405B, L, 262144, TORCH)[0]) == 32768 * 2 * 16 * 128 * 2


def test_torch_allgather_across_nodes_by_hand():
    """cp 8 ranks 8 apart, one per node: the all-gather brings each GPU the other 7 chunks through its
    NIC, 7 C / B_out (plus 7 latencies); the dKV hop sends float32, 2 C / B_out. Forward: the gather
    behind 1/8 of the attention; backward: the gather again behind 1/8, 7 dKV hops behind the other
    7/8 and the eighth exposed."""
    L = _layouts(8, 8)
    eff = efficiencies_for(H100_500W)[0]
    out = scale_out_fabric(H100_500W, eff)
    C = 32768 * 2 * 16 * 128 * 2
    parts = cp_layer_parts(LLAMA_405B, L, 262144, H100_500W, eff, TORCH)
    (gather, share), = parts.fwd
    share = float(np.ravel(share)[0])
    assert share == pytest.approx(1 / 8)
    assert float(gather[0]) == pytest.approx(7 * C / out.busbw_bytes_per_s, rel=0.01)
    hop = out.latency_s + 2 * C / out.busbw_bytes_per_s
    assert float(parts.bwd_tail_s[0]) == pytest.approx(hop, rel=1e-9)
    (g_b, s_g), (ring, s_r) = parts.bwd
    assert float(g_b[0]) == pytest.approx(float(gather[0]))
    assert float(np.ravel(s_g)[0]) == pytest.approx(1 / 8) and float(np.ravel(s_r)[0]) == pytest.approx(7 / 8)
    assert float(ring[0]) == pytest.approx(7 * hop, rel=1e-9)
    # With 126 ms of forward attention kernels the gather (about 37 ms at 50 GB/s) hides behind
    # 126 / 8 = 15.75 ms of them: about 21 ms exposed.
    t = float(gather[0])
    assert float(exposed_s(t, share * 0.126, 1.0)) == pytest.approx(t - 0.01575)


def test_p2p_ring_unchanged_by_hand():
    """Llama 3 8B, tp 1, cp 4 inside one NVLink domain, 128K tokens: C = 32768 * 2 * 8 * 128 * 2 B;
    3 hops forward behind the whole attention, 6 backward, nothing exposed by construction."""
    L = _layouts(1, 4)
    hw = load_hardware("h100-sxm")
    eff = efficiencies_for(hw)[0]
    up = scale_up_fabric(hw, eff)
    C = 32768 * 2 * 8 * 128 * 2
    parts = cp_layer_parts(LLAMA_8B, L, 131072, hw, eff, P2P)
    hop = up.latency_s + C / up.busbw_bytes_per_s
    (fwd, share), = parts.fwd
    assert float(np.ravel(share)[0]) == 1.0 and float(fwd[0]) == pytest.approx(3 * hop, rel=1e-9)
    assert float(parts.bwd_s[0]) == pytest.approx(6 * hop, rel=1e-9)
    assert float(parts.bwd_tail_s[0]) == 0.0


@pytest.mark.parametrize("name", sorted(CP_COMM_TYPES))
def test_no_traffic_without_cp(name):
    parts = cp_layer_parts(LLAMA_8B, _layouts(1, 1), 8192, H100_500W, efficiencies_for(H100_500W)[0],
                           sw(cp_comm_type=name))
    assert float(parts.fwd_s[0]) == 0.0 and float(parts.bwd_s[0]) == 0.0


def test_stacks_and_vocabulary():
    assert SoftwareStack().cp_comm_type == "p2p"
    assert SoftwareStack(stack="megatron-core").cp_comm_type == "p2p"
    for name in ("torchtitan-2412-eager", "torchtitan-2412-compile"):
        assert SoftwareStack(stack=name).cp_comm_type == "torch_allgather"
    with pytest.raises(InputError, match="cp_comm_type"):
        cp_comm_type("ring")
    assert np.isclose(CP_COMM_TYPES["torch_allgather"].dkv_bytes_per_element, 4)
