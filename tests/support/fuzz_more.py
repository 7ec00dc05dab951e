"""More of the fuzzing harness (issue 48): the log readers, ``perfmodel size`` over several hardware
types in worker processes, a scenario's studies section and its software options.

The outcomes are ``fuzz.Outcome``'s: a log is read or refused in one line (API ``parse_log``, CLI
``read-log`` and ``diagnose --log``); ``size`` with two hardware types and two worker processes ends
in exit 0 or in the one-line error, never in a broken process pool; scenarios with random software
options and studies sections go through the API and the CLI like any other.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import yaml

from support.fuzz import HOSTILE_VALUES, TINY_MODEL, Outcome, check_cli, guarded, mutate

NUMBERS = ("5.2", "0.731", "12,345.6", "0", "0.0", "-1", "1e309", "-1e309", "nan", "NaN", "inf", "-inf",
           "1" + "0" * 400, "5e-324", "1e-300", ".", "..", "1.2.3", "", "0x10", "1_000", "９")
"""Cells and values a log may carry: ordinary, zero, negative, overflowing, not numbers at all."""
SHALLOW_HOSTILE = tuple(v for v in HOSTILE_VALUES if not (isinstance(v, list) and v and isinstance(v[0], list))
                        and not (type(v) is int and abs(v) > 10**4000))
"""``HOSTILE_VALUES`` but the 2,000-deep list and the 4,302-digit integer, which ``fuzz.mutate``
cannot copy through JSON (the scenario-level fuzz puts them in itself)."""


def _n(rng: random.Random, ordinary: float = 0.6) -> str:
    return f"{rng.uniform(0.1, 900):.4g}" if rng.random() < ordinary else rng.choice(NUMBERS)


def _megatron(rng: random.Random, lines: int) -> list[str]:
    out = []
    for i in range(1, lines + 1):
        out.append(f" [2025-03-02 10:01:52] iteration {i:8d}/     100 | consumed samples: {128 * i} | elapsed time "
                   f"per iteration (ms): {_n(rng)} | throughput per GPU (TFLOP/s/GPU): {_n(rng)} | learning rate: "
                   f"1.5E-07 | global batch size: {rng.choice(['128', '0', '1' + '0' * 40, '64'])} | "
                   "lm loss: 1.2E+01 |")
        if rng.random() < 0.3:
            out += ["(min, max) time across ranks (ms):",
                    f"    forward-backward ...............................: ({_n(rng)}, {_n(rng)})",
                    f"    optimizer ......................................: ({_n(rng)}, {_n(rng)})"]
        if rng.random() < 0.2:
            out.append(f"[Rank 0] (after {i} iterations) memory (MB) | allocated: 1.0 | max allocated: {_n(rng)}")
    return out


def _nemo(rng: random.Random, lines: int) -> list[str]:
    return [f"Training epoch 0, iteration {i}/49 | lr: 1.5e-07 | global_batch_size: {_n(rng, 0.8)} | "
            f"reduced_train_loss: 12.01 | train_step_timing in s: {_n(rng)} | consumed_samples: 128"
            for i in range(lines)]


def _torchtitan(rng: random.Random, lines: int) -> list[str]:
    return [f"[rank0]: step: {i}  loss: 10.9  memory: {_n(rng)}GiB(40.1%)  tps: {_n(rng)}  tflops: {_n(rng)}  "
            f"mfu: {_n(rng)}%" for i in range(1, lines + 1)]


def _hf(rng: random.Random, lines: int) -> list[str]:
    keys = ("train_runtime", "train_samples_per_second", "train_steps_per_second", "train_tokens_per_second")
    return ["{" + ", ".join(f"'{k}': {_n(rng, 0.5) or '0'}" for k in rng.sample(keys, rng.randint(1, 4))) + "}"
            for _ in range(lines)]


def _csv(rng: random.Random, lines: int) -> list[str]:
    columns = rng.sample(["iteration", "step_time_s", "tokens_per_s_per_gpu", "num_gpus", "global_batch_size",
                          "seq_length", "mfu", "gpu_utilisation", "peak_memory_gib", "train/loss",
                          "throughput/device/items_per_sec", "device/mfu"], rng.randint(1, 5))
    if rng.random() < 0.7 and "step_time_s" not in columns:
        columns.append("step_time_s")
    trail = "," if rng.random() < 0.3 else ""
    rows = [",".join(columns) + trail]
    for _ in range(lines):
        cells = [_n(rng, 0.7) for _ in columns] + ([_n(rng)] * rng.choice([0, 0, 1, 2]))
        rows.append(",".join(cells) + trail)
    return rows


def _yaml(rng: random.Random, lines: int) -> list[str]:
    keys = ("step_time_s", "tokens_per_s_per_gpu", "mfu", "num_gpus", "global_batch_size", "peak_memory_gib",
            "gpu_utilisation", "data_wait_s")
    return [f"{k}: {_n(rng, 0.5) or 'null'}" for k in rng.sample(keys, rng.randint(1, min(lines, len(keys))))]


READERS = (_megatron, _nemo, _torchtitan, _hf, _csv, _yaml)


def log_text(rng: random.Random) -> str:
    """A log in one of the formats perfmodel reads, with hostile numbers, trailing commas, extra or
    missing cells; now and then two formats mixed, carriage returns or a very long line."""
    reader = rng.choice(READERS)
    lines = reader(rng, rng.randint(1, 12))
    if rng.random() < 0.1:
        lines += rng.choice(READERS)(rng, 2)
    if rng.random() < 0.1:
        lines.insert(rng.randrange(len(lines) + 1), "x" * 200_000)
    return rng.choice(["\n", "\r\n", "\r"]).join(lines) + "\n"


def _tiny_run(tmp: Path) -> Path:
    path = tmp / "run.yaml"
    if not path.exists():
        path.write_text(yaml.safe_dump({"scenario": dict(
            name="tiny", hardware="h100-sxm", num_gpus=8, model=TINY_MODEL, seq_length=1024, global_batch_size=16,
            micro_batch_size=1, parallelism=dict(tp=1, pp=1, cp=1), precision="bf16")}))
    return path


def check_log(text: str, tmp: Path, rng: random.Random) -> Outcome:
    """A log through ``parse_log`` (API), then ``read-log`` or ``diagnose --log`` (CLI)."""
    from perfmodel.spec.observed.logs import parse_log

    def api():
        runs = parse_log(text, "fuzz.log")
        bad = [r for r in runs if (r.steady_step_s() or 1.0) <= 0]
        return Outcome("violation", f"non-positive step time in {bad[0]}") if bad else Outcome("ok")
    out = guarded(api)
    if out.defect:
        return out
    path = tmp / rng.choice(["fuzz.log", "fuzz.csv", "fuzz.txt"])
    path.write_text(text)
    argv = rng.choice([["read-log", str(path), "--format", "json"],
                       ["diagnose", str(_tiny_run(tmp)), "--log", str(path), "--format", "json"]])
    return check_cli(argv, json_out=True)


def software_options(rng: random.Random, d: dict) -> dict:
    """Random software options for scenario ``d`` (often valid for it, sometimes not)."""
    sw: dict = {}
    if rng.random() < 0.6:
        sw["overlap"] = {k: rng.choice([0.0, 0.5, 1.0]) for k in rng.sample(["tp", "cp", "ep", "pp", "dp", "fsdp"],
                                                                             rng.randint(1, 4))}
    for key, choices in (("attention_backend", ["flash", "cudnn", "unfused"]),
                         ("elementwise_kernels", ["fused", "eager", "compiled"]),
                         ("optimizer_kernels", ["fused", "foreach"]), ("cross_entropy", ["fused", "eager_fp32"]),
                         ("cuda_graphs", [True, False]), ("attention_dropout", [True, False]),
                         ("fsdp_collectives_per_layer", [1, 2]), ("moe_dispatcher", ["alltoall", "flex"]),
                         ("moe_expert_capacity_factor", [None, 1.0, 1.25]), ("moe_load_imbalance", [1.0, 1.3])):
        if rng.random() < 0.3:
            sw[key] = rng.choice(choices)
    if d["parallelism"]["pp"] == 1 and d["recompute"] == "none" and rng.random() < 0.4:
        sw["activation_offload_layers"] = rng.choice([1, 2, 3])
    if d["recompute"] == "selective" and rng.random() < 0.3:
        sw["selective_recompute"] = rng.choice(["core_attn", "op_sac", "save_qkv_proj"])
    if rng.random() < 0.05:
        sw[rng.choice(list(sw) or ["cuda_graphs"])] = rng.choice(SHALLOW_HOSTILE)
    return sw


def studies_section(rng: random.Random) -> dict:
    """A scenario's studies section: valid choices, counts outside any page's list, or hostile values."""
    st = {"grow_batch": rng.choice([True, False]), "objective": rng.choice(["time", "cost", "tokens_per_usd"]),
          "scale_mode": rng.choice(["strong", "weak", "grow"]),
          "scale_gpu_counts": rng.sample([8, 16, 24, 64, 96, 128, 1000], rng.randint(1, 3)),
          "size_gpu_counts": rng.sample([8, 16, 24, 64], rng.randint(1, 2)),
          "size_hardware": rng.sample(["h100-sxm", "b200", "h200-sxm", "mi300x"], rng.randint(1, 2)),
          "max_batch_tokens": rng.choice([1e6, 16.8e6, 1e9])}
    if rng.random() < 0.3:
        st[rng.choice(list(st))] = rng.choice(SHALLOW_HOSTILE + ([], ["../../etc/passwd"], [0], [-8]))
    return st


def check_studies(d: dict, tmp: Path, rng: random.Random) -> Outcome:
    """A scenario whose studies section is random (and sometimes mutated) through the CLI's study commands."""
    from support.fuzz import check_api
    d = {**d, "studies": studies_section(rng)}
    out = check_api(d)
    if out.defect:
        return out
    path = tmp / "studies.yaml"
    try:
        path.write_text(yaml.safe_dump(json.loads(json.dumps(d)), allow_unicode=True))
    except (ValueError, RecursionError, yaml.YAMLError):
        return Outcome("ok")     # not writable as YAML (a 2,000-deep list): the API saw it
    cmd = rng.choice([["scale", str(path), "--recompute", "none", "--max-micro-batch-size", "1"],
                      ["size", str(path), "--jobs", "1", "--no-progress", "--tokens", "1e9"]])
    return check_cli(cmd + ["--format", "json"], json_out=True)


def check_size_processes(d: dict, tmp: Path, rng: random.Random) -> Outcome:
    """``perfmodel size`` over two hardware types in two worker processes: an input error raised in a
    worker comes back as the one-line error, not as a broken process pool."""
    path = tmp / "size.yaml"
    if rng.random() < 0.5:
        d = mutate(d, rng)
    try:
        path.write_text(yaml.safe_dump(json.loads(json.dumps(d)), allow_unicode=True))
    except (ValueError, RecursionError, yaml.YAMLError):
        path.write_text("hardware: h100-sxm\nnum_gpus: " + "1" + "0" * 4_400 + "\n")
    extra = rng.choice([[], ["--set", "reliability.checkpoint_interval_s=1e-300"], ["--deadline-days", "0.001"],
                        ["--budget-usd", "1"], ["--set", "seq_length=3"]])
    argv = ["size", str(path), "--hardware", rng.choice(["h100-sxm,b200", "h100-sxm,mi300x,a100-sxm-80gb"]),
            "--gpus", rng.choice(["8,16", "16,64"]), "--jobs", "2", "--no-progress", "--tokens", "1e9",
            "--format", "json", *extra]
    return check_cli(argv, json_out=True)
