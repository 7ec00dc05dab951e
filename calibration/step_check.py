"""End-to-end check on one GPU: time real training steps of a Llama-style model in eager
PyTorch and write the perfmodel scenario that describes them, so ``perfmodel predict`` can be
compared with a measured step on the same machine.

    python -m calibration step-check --layers 4 --seq 8192 --out DIR     (needs torch and a GPU)
    perfmodel predict DIR/<name>/scenario.yaml                            (anywhere)

The model follows the Llama 3 block as torchtitan 9dec370 writes it in eager mode, which is
what the scenario's ``software: {elementwise_kernels: eager, cross_entropy: eager_fp32}`` describes:
RMSNorm and rotary embedding computed in fp32, grouped-query K/V repeated by a copy,
SDPA (flash backend, causal), SwiGLU as silu(x W1) * (x W3) then W2, and an fp32
cross-entropy over the logits. Mixed precision follows Megatron's layout on one GPU: bf16
weights for the compute, gradients accumulated over the micro-batches, fp32 master weights
and fused AdamW states, the bf16 weights refreshed from the masters after each step.

A preset with experts (``--preset qwen3-30b-a3b``, ``mixtral-8x7b``) gets Megatron-Core's
unfused MoE layer as its all-to-all dispatcher runs it on one GPU (core_r0.13
``moe_utils.permute`` / ``unpermute``, ``sort_chunks_by_idxs`` and ``MoEAlltoAllTokenDispatcher``; the scenario's
default ``moe_permute_fusion: false``, ``moe_router_fusion: false``, ``moe_dispatcher:
alltoall``): a bf16 router GEMM with an fp32 softmax and top-k; routing balanced exactly (each
expert takes top_k x tokens / experts, as the model assumes and as NVIDIA's recipes force with
``--moe-router-force-load-balancing``), the probabilities read at the routed experts and
normalised; permutation by ``masked_select`` of the token indices and ``index_select``; the
sort by local expert after the (one-rank, so absent) all-to-all and its inverse as a split and
a ``cat`` of the per-expert chunks, with the tokens per expert read to the host; the
experts as two ``torch._grouped_mm`` calls (fc1 of width 2 x ffn for the gate and up
projections, fc2) around an eager SwiGLU; unpermutation by a multiply with the probabilities and
a ``scatter_add_`` into zeros.

The scenario is a preset with ``num_layers`` lowered so that the whole step fits on one GPU
without recompute. Nothing here feeds a profile: it is a check, and its numbers go to
docs/calibration.md as measured.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from pathlib import Path

import yaml

import perfmodel as pm
from perfmodel.spec.errors import InputError, write_text_file
from perfmodel.spec.limits import MAX_BENCH_REPEATS
from perfmodel.spec.presets import load_model

from .timing import slug, today

ROPE_THETA = 500000.0
"""Llama 3 rotary base (Dubey et al. 2024, Table 3)."""
NORM_EPS = 1e-5
"""Llama 3 RMSNorm epsilon (HF meta-llama/Meta-Llama-3-8B config.json rms_norm_eps)."""


def _model(preset: str, layers: int):
    """The preset with its layer count lowered: the model both the scenario and the run use. The
    timed block normalises no queries or keys, so a preset's ``qk_norm`` (Qwen3) is off in both."""
    return load_model(preset).model_copy(update={"num_layers": layers, "qk_norm": False})


def scenario_dict(preset: str, layers: int, seq: int, mbs: int, gbs: int, hardware: str,
                  compiled: bool = False) -> dict:
    """The perfmodel scenario of the timed run (one GPU, no parallelism, no recompute).
    ``compiled``: the loss function ran under ``torch.compile``, whose generated kernels fuse
    the norms, rotary embedding, activation and loss (the ``fused`` software options)."""
    spec = _model(preset, layers)
    _check_supported(spec, seq, mbs)
    model = spec.model_dump(exclude_none=True, exclude_defaults=True)
    model.update(name=f"{spec.name} ({layers} layers)", num_layers=layers)
    data = {
        "name": f"step_check_{slug(preset)}_{layers}l_s{seq}" + ("_compiled" if compiled else ""),
        "hardware": hardware, "num_gpus": 1, "model": model,
        "seq_length": seq, "micro_batch_size": mbs, "global_batch_size": gbs,
        "parallelism": {"tp": 1, "pp": 1, "vpp": 1, "cp": 1, "ep": 1, "etp": 1, "sequence_parallel": False,
                        "zero_stage": 0},
        "recompute": "none", "precision": "bf16",
        "software": ({"elementwise_kernels": "fused", "cross_entropy": "fused"} if compiled else
                     {"elementwise_kernels": "eager", "cross_entropy": "eager_fp32"}),
    }
    pm.resolve(pm.parse_scenario(data), profile=None)   # a clear error here (fields and layout), not after a GPU run
    return data


def parameter_shapes(spec) -> dict:
    """Name -> shape of every weight of the timed model: the model the scenario describes (the
    tests hold their count to perfmodel's parameter count, without a GPU)."""
    h, a, g, d = spec.hidden_size, spec.num_attention_heads, spec.num_query_groups, spec.attn_head_dim
    shapes = {"emb": (spec.vocab_size, h), "out": (spec.vocab_size, h), "norm": (h,)}
    for i in range(spec.num_layers):
        shapes.update({f"{i}.wqkv": ((a + 2 * g) * d, h), f"{i}.wo": (h, a * d), f"{i}.n1": (h,), f"{i}.n2": (h,)})
        if spec.moe is None:
            f = spec.ffn_hidden_size
            shapes.update({f"{i}.w1": (f, h), f"{i}.w3": (f, h), f"{i}.w2": (h, f)})
        else:
            E, f = spec.moe.num_experts, spec.moe.expert_ffn_hidden_size
            shapes.update({f"{i}.router": (E, h), f"{i}.fc1": (E, 2 * f, h), f"{i}.fc2": (E, h, f)})
    return shapes


def _check_supported(spec, seq: int, mbs: int) -> None:
    """What the timed model can build: dense Llama blocks, or every layer a routed-expert MoE
    whose balanced expert groups suit ``torch._grouped_mm`` (multiples of 16 rows)."""
    if spec.mla is not None:
        raise InputError("--preset", f"{spec.name}: multi-head latent attention is not built by step-check")
    if spec.moe is None:
        return
    moe = spec.moe
    if moe.num_shared_experts or moe.num_dense_layers or moe.interleave_step != 1:
        raise InputError("--preset", f"{spec.name}: step-check builds MoE models whose every layer is routed "
                                     "experts only (no shared experts, no dense layers)")
    routed = mbs * seq * moe.top_k
    if routed % (16 * moe.num_experts):
        raise InputError("--seq", f"micro-batch tokens x top_k ({routed:,}) must be a multiple of 16 x "
                                  f"{moe.num_experts} experts, so that each expert takes a whole number of "
                                  "16-row groups")


def rope_table(torch, seq: int, head_dim: int):
    """Complex rotary factors for ``seq`` positions (Llama 3 base ``ROPE_THETA``), fp32."""
    freqs = 1.0 / ROPE_THETA ** (torch.arange(0, head_dim, 2, device="cuda", dtype=torch.float32) / head_dim)
    angles = torch.outer(torch.arange(seq, device="cuda").float(), freqs)
    return torch.polar(torch.ones(seq, head_dim // 2, device="cuda"), angles)


def rms_norm(torch, x, weight):
    """torchtitan's RMSNorm in eager mode: computed in fp32, cast back, scaled."""
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + NORM_EPS)).type_as(x) * weight


def rotary(torch, x, rope):
    """Rotary embedding of (batch, seq, heads, dim) as complex multiplication in fp32."""
    _, seq, _, d = x.shape
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(xc * rope.view(1, seq, 1, d // 2)).flatten(3).type_as(x)


def repeat_kv(x, heads: int):
    """Grouped K or V (batch, seq, groups, dim) copied out to ``heads`` heads."""
    b, seq, g, d = x.shape
    return x[:, :, :, None, :].expand(b, seq, g, heads // g, d).reshape(b, seq, heads, d)


def swiglu(F, gate, up):
    """silu(x W1) * (x W3): two eager kernels."""
    return F.silu(gate) * up


def _build(spec, seq: int):
    import torch
    import torch.nn.functional as F

    h, a, g, d = spec.hidden_size, spec.num_attention_heads, spec.num_query_groups, spec.attn_head_dim
    dev, bf16 = "cuda", torch.bfloat16

    def w(*shape):
        if len(shape) == 1:
            return torch.ones(*shape, device=dev)
        return (torch.randn(*shape, device=dev, dtype=torch.float32) / math.sqrt(shape[-1])).requires_grad_(False)

    master = {name: w(*shape) for name, shape in parameter_shapes(spec).items()}
    params = {k: v.to(bf16).requires_grad_(True) for k, v in master.items()}
    rope = rope_table(torch, seq, d)

    def norm(x, weight):
        return rms_norm(torch, x, weight)

    def dense_mlp(i, y):
        return F.linear(swiglu(F, F.linear(y, params[f"{i}.w1"]), F.linear(y, params[f"{i}.w3"])), params[f"{i}.w2"])

    moe_layer = _moe_layer(spec, params, torch, F) if spec.moe is not None else None

    def loss_of(tokens, labels):
        b = tokens.shape[0]
        x = F.embedding(tokens, params["emb"])
        for i in range(spec.num_layers):
            y = norm(x, params[f"{i}.n1"])
            q, k, v = F.linear(y, params[f"{i}.wqkv"]).split([a * d, g * d, g * d], dim=-1)
            q, k = rotary(torch, q.view(b, seq, a, d), rope), rotary(torch, k.view(b, seq, g, d), rope)
            k, v = repeat_kv(k, a), repeat_kv(v.view(b, seq, g, d), a)
            o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
            x = x + F.linear(o.transpose(1, 2).reshape(b, seq, a * d), params[f"{i}.wo"])
            y = norm(x, params[f"{i}.n2"])
            x = x + (dense_mlp(i, y) if moe_layer is None else moe_layer(i, y.reshape(b * seq, h)).view(b, seq, h))
        logits = F.linear(norm(x, params["norm"]), params["out"])
        return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten())

    return master, params, loss_of


def _moe_layer(spec, params, torch, F):
    """Megatron-Core's unfused MoE layer on one GPU (the module docstring lists its steps)."""
    E, k = spec.moe.num_experts, spec.moe.top_k

    def layer(i, y):
        T = y.shape[0]
        scores = torch.softmax(F.linear(y, params[f"{i}.router"]).float(), dim=-1)
        scores.topk(k, dim=-1)                         # the router's top-k, timed; routing is balanced below
        slots = torch.arange(T * k, device=y.device)
        routed = slots % E                             # token t takes experts t k .. t k + k - 1 (mod E)
        routing_map = torch.zeros(T, E, dtype=torch.bool, device=y.device)
        routing_map[slots // k, routed] = True
        picked = scores * routing_map
        probs = picked / picked.sum(-1, keepdim=True)
        # permute: token indices sorted by expert (masked_select), then index_select
        mask_t = routing_map.T.contiguous()
        token_idx = torch.arange(T, device=y.device).unsqueeze(0).expand(E, T).masked_select(mask_t)
        probs_perm = probs.T.contiguous().masked_select(mask_t)
        x = y.index_select(0, token_idx)
        counts = mask_t.sum(-1)
        sizes = counts.tolist()                        # tokens per expert on the host, as the dispatcher has them
        x = torch.cat(torch.split(x, sizes), 0)        # sort by local expert: split and cat (the identity order on one rank)
        offs = torch.cumsum(counts, 0).to(torch.int32)
        up = torch._grouped_mm(x, params[f"{i}.fc1"].transpose(-2, -1), offs=offs)
        gate, lin = up.chunk(2, dim=-1)
        z = torch._grouped_mm(swiglu(F, gate, lin), params[f"{i}.fc2"].transpose(-2, -1), offs=offs)
        z = torch.cat(torch.split(z, sizes), 0)        # its inverse before the combine
        z = z * probs_perm.unsqueeze(-1).to(z.dtype)
        return torch.zeros_like(y).scatter_add_(0, token_idx.unsqueeze(1).expand(-1, y.shape[1]), z)

    return layer


def run(preset: str, layers: int, seq: int, mbs: int, gbs: int, steps: int, warmup: int,
        compiled: bool = False) -> dict:
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    spec = _model(preset, layers)
    master, params, loss_of = _build(spec, seq)
    if compiled:        # compiled during the warm-up steps, which are not timed
        loss_of = torch.compile(loss_of)
    grads = {k: torch.zeros_like(v) for k, v in master.items()}
    names = list(master)
    opt = torch.optim.AdamW([master[k] for k in names], lr=1e-5, fused=True)
    tokens = torch.randint(0, spec.vocab_size, (gbs // mbs, mbs, seq), device="cuda")

    def one_step():
        for mb in range(gbs // mbs):
            loss_of(tokens[mb], tokens[mb]).backward()
        for k in names:
            grads[k].copy_(params[k].grad)            # bf16 -> fp32 main gradient
            master[k].grad = grads[k]
            params[k].grad = None
        opt.step()
        with torch.no_grad():
            for k in names:
                params[k].copy_(master[k])            # fp32 master -> bf16 compute weight

    times = []
    torch.cuda.reset_peak_memory_stats()
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        for step in range(warmup + steps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            one_step()
            torch.cuda.synchronize()
            if step >= warmup:
                times.append(time.perf_counter() - t0)
        kernels = _kernel_table(one_step)
    return {"step_times_s": times, "median_step_s": statistics.median(times),
            "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30,
            "num_parameters": sum(v.numel() for v in master.values()), "kernels": kernels}


def _kernel_table(step) -> str:
    """GPU time per kernel over one more step (torch.profiler), the 40 longest."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    for key in ("self_device_time_total", "self_cuda_time_total"):
        try:
            return prof.key_averages().table(sort_by=key, row_limit=40, max_name_column_width=90)
        except (AttributeError, KeyError, ValueError):
            continue
    return ""


def _require_cuda():
    try:
        import torch
    except ImportError:
        raise InputError("step-check", "torch is not installed (pip install 'perfmodel[bench]')") from None
    if not torch.cuda.is_available():
        raise InputError("step-check", "needs a CUDA GPU; torch sees none")
    return torch


def main(argv=None, parser_class=argparse.ArgumentParser) -> int:
    """Run the check; ``calibration.cli`` calls it with its one-line-error parser."""
    p = parser_class(prog="step-check", description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="llama3-8b")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--seq", type=int, default=8192)
    p.add_argument("--mbs", type=int, default=1)
    p.add_argument("--gbs", type=int, default=8)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--hardware", default="h100-sxm", help="perfmodel hardware id for the scenario")
    p.add_argument("--compile", action="store_true", help="run the loss function under torch.compile")
    p.add_argument("--out", default="calibration/results")
    args = p.parse_args(argv)
    if not 1 <= args.steps <= MAX_BENCH_REPEATS:
        raise InputError("--steps", f"must be 1 to {MAX_BENCH_REPEATS}, got {args.steps}")
    if not 0 <= args.warmup <= MAX_BENCH_REPEATS:
        raise InputError("--warmup", f"must be 0 to {MAX_BENCH_REPEATS}, got {args.warmup}")
    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise InputError("--out", f"{args.out} is a file, not a folder")
    if args.compile and args.warmup < 1:
        raise InputError("--warmup", "--compile needs at least 1 warm-up step (the compilation runs in it)")
    scenario = scenario_dict(args.preset, args.layers, args.seq, args.mbs, args.gbs, args.hardware, args.compile)
    torch = _require_cuda()

    measured = run(args.preset, args.layers, args.seq, args.mbs, args.gbs, args.steps, args.warmup, args.compile)
    measured.update(device=torch.cuda.get_device_name(), torch_version=str(torch.__version__),
                    cuda_version=str(torch.version.cuda), cudnn_version=int(torch.backends.cudnn.version()),
                    date=today())
    out = Path(args.out) / scenario["name"]
    write_text_file(out / "scenario.yaml", yaml.safe_dump(scenario, sort_keys=False), "--out")
    write_text_file(out / "kernels.txt", measured.pop("kernels"), "--out")
    write_text_file(out / "measured.yaml", yaml.safe_dump(measured, sort_keys=False), "--out")
    print(f"{scenario['name']}: median step {measured['median_step_s']:.4f} s over {args.steps} steps, "
          f"peak {measured['peak_memory_gib']:.1f} GiB; wrote {out}")
    return 0
