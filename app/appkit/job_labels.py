"""The job editor's words for the scenario's own fields, its parallelism and a custom model: a
shorter label, the help, a step, the widget key and the sidebar group of the fields that have
them (``appkit.job_form`` generates every field's widget from the schema; a field this table
leaves out gets its name as label, its docstring's first sentence as help, and its room's group:
"Batch and precision" for the scenario's, "Cluster and layout" for the parallelism's, "Model"
for the model's)."""

from __future__ import annotations

from perfmodel.spec.schedules import schedule_names
from perfmodel.spec.units import GIGA

from .schema_form import Look

CLUSTER = "Cluster and layout"
BATCH = "Batch and precision"
MODEL = "Model"
MOE = "Mixture of experts (0 experts = dense)"
FILE = "Scenario file and link"
DEFAULT_SCHEDULE = "default"
"""The schedule selectbox's word for a scenario that names none (1f1b, interleaved by vpp)."""

SCENARIO_LOOKS = {
    "num_gpus": Look("GPUs", group=CLUSTER, step=8, min_value=0, wide=True),   # 0 reaches the one-line error
    "seq_length": Look("Sequence length", step=1024),
    "global_batch_size": Look("Global batch (seqs)", step=8),
    "micro_batch_size": Look("Micro-batch (seqs)"),
    "training_tokens": Look("Training tokens (billions, 0 = none)", key="training_tokens_b", scale=GIGA, step=100.0),
    "precision": Look("Precision"),
    "recompute": Look("Recompute"),
    "name": Look("Scenario name", key="scenario_name", group=FILE, wide=True),
}
"""The scenario's own fields, in the order the sidebar draws them (the others follow)."""

PARALLEL_LOOKS = {
    "tp": Look("tp", "tensor parallel"),
    "pp": Look("pp", "pipeline parallel"),
    "vpp": Look("vpp", "virtual stages per pipeline rank"),
    "pipeline_schedule": Look(
        "Pipeline schedule",
        "default: 1f1b, or interleaved when vpp > 1. zb-h1, zb-h2, zb-v: zero-bubble schedules (Qi et al. 2023, "
        "2024; zb-v needs vpp 2); dualpipe, dualpipe-v: DeepSeek-V3's (dualpipe-v needs vpp 2)",
        choices=schedule_names, none_choice=DEFAULT_SCHEDULE, wide=True),
    "cp": Look("cp", "context parallel"),
    "ep": Look("ep", "expert parallel"),
    "etp": Look("etp", "tensor parallel inside experts"),
    "zero_stage": Look("ZeRO stage", row=2),
    "sequence_parallel": Look("SP", "sequence parallelism (Megatron)", read="sp"),
}

MODEL_LOOKS = {
    "name": Look("Name", wide=True),
    "num_layers": Look("Layers"),
    "hidden_size": Look("Hidden size", step=64),
    "num_attention_heads": Look("Attention heads"),
    "num_query_groups": Look("KV heads (GQA)", read="kv_heads"),
    "head_dim": Look("Head dim (0 = h/a)", step=8),
    "ffn_hidden_size": Look("MLP width", step=64),
    "vocab_size": Look("Vocabulary", step=256),
    "mtp_layers": Look("MTP layers"),
    "gated_mlp": Look("Gated MLP (SwiGLU)"),
    "tied_embeddings": Look("Tied embeddings"),
    "attention_window": Look("Sliding window (0 = none)", "Keys a query attends to in windowed layers (GPT-OSS "
                             "128, Mistral 7B v0.1 4096).", step=128),
    "full_attention_every": Look("Full attention every n-th layer (0 = all windowed)",
                                 "GPT-OSS 2, Gemma 3 6; needs a sliding window."),
}

MOE_LOOKS = {
    "num_experts": Look("Experts", min_value=0),
    "top_k": Look("Top-k"),
    "expert_ffn_hidden_size": Look("Expert MLP width", step=64),
    "num_shared_experts": Look("Shared experts"),
    "num_dense_layers": Look("Leading dense layers"),
    "interleave_step": Look("MoE every n-th layer", "After the leading dense layers: 1 = every layer MoE, 2 = "
                            "dense and MoE alternate (Llama 4 Maverick)."),
}
DENSE_MOE = {"num_experts": 0, "top_k": 1}
"""A dense model's expert widgets (0 experts = no MoE); the expert width starts at the MLP's."""
