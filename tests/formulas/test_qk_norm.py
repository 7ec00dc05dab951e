"""The attention's own norms (``workload.qk_norm_op``): per-head QK norm and MLA's latent norms,
bytes worked out by hand."""

from perfmodel.formulas.ops import MLA_LATENT_NORM_OP, QK_NORM_OP, LayerKind
from perfmodel.formulas.serving import serving_layer_ops
from perfmodel.formulas.workload import layer_ops, qk_norm_op
from perfmodel.spec.model import MlaSpec, ModelSpec, MoeSpec
from perfmodel.spec.software import SoftwareStack

QWEN3_30B = dict(name="q", num_layers=48, hidden_size=2048, num_attention_heads=32, num_query_groups=4,
                 head_dim=128, ffn_hidden_size=6144, gated_mlp=True, vocab_size=151936,
                 moe=MoeSpec(num_experts=128, top_k=8, expert_ffn_hidden_size=768))


def test_qk_norm_reads_and_writes_q_and_k_once_forward():
    op = qk_norm_op(ModelSpec(**QWEN3_30B, qk_norm=True), eager=False)
    # Q: 32 heads x 128 = 4096, K: 4 x 128 = 512 elements a token; bf16 read + write = 4 bytes
    assert op.name == QK_NORM_OP
    assert op.bytes_per_token == (4096 + 512) * 4
    assert op.kernels == 2
    assert op.bwd_bytes_per_token is None          # twice the forward, as the layer's own norms


def test_eager_qk_norm_counts_pytorch_rmsnorm_kernel_by_kernel():
    op = qk_norm_op(ModelSpec(**QWEN3_30B, qk_norm=True), eager=True)
    # eager RMSNorm: 36 bytes an element forward in 8 kernels, 56 backward in 12 (eager.py)
    assert op.bytes_per_token == 36 * 4608 and op.kernels == 16
    assert op.bwd_bytes_per_token == 56 * 4608 and op.bwd_kernels == 24


def test_no_qk_norm_no_op():
    assert qk_norm_op(ModelSpec(**QWEN3_30B), eager=False) is None
    ops = layer_ops(ModelSpec(**QWEN3_30B), LayerKind.MOE, SoftwareStack())
    assert QK_NORM_OP not in [o.name for o in ops]


def test_mla_latent_norms_are_counted_without_the_flag():
    m = ModelSpec(name="d", num_layers=61, hidden_size=7168, num_attention_heads=128, ffn_hidden_size=18432,
                  gated_mlp=True, vocab_size=129280,
                  mla=MlaSpec(q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64,
                              v_head_dim=128))
    op = qk_norm_op(m, eager=False)
    assert op.name == MLA_LATENT_NORM_OP
    assert op.bytes_per_token == (1536 + 512) * 4 and op.kernels == 2


def test_the_layer_carries_it_and_serving_runs_it_inside_the_rotary_kernel():
    m = ModelSpec(**QWEN3_30B, qk_norm=True)
    assert QK_NORM_OP in [o.name for o in layer_ops(m, LayerKind.MOE, SoftwareStack())]
    assert QK_NORM_OP not in [o.name for o in serving_layer_ops(m, LayerKind.MOE)]
