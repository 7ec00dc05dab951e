"""The framework and GPU a training log was written by, inferred from its format and content.

A log measures a run; the scenario says what ran. A scenario that names no software stack is
judged against Megatron-Core's defaults, which misjudges a torchtitan or HF Trainer run (a
torchtitan log judged so came out +62%, +7% with its own stack: issue 49). This module reads the
framework a log's format belongs to and the GPU its text names, so the caller can assume that stack
where the scenario names none, and say so as an assumption the user can change.

=============  =========================================================  ======================
framework      what in the log shows it                                    stack assumed
=============  =========================================================  ======================
NeMo           ``train_step_timing in s`` (NeMo 1 and 2), ``[NeMo ...]``   ``nemo-perf``
Megatron-LM    ``elapsed time per iteration (ms)``                         ``megatron-core``
torchtitan     ``[titan]`` or ``step: N ... tps: T``                       ``torchtitan-eager``;
                                                                           ``torchtitan-compile``
                                                                           where it logs compiling
HF Trainer     ``train_samples_per_second``, ``***** Running training``   ``pytorch-eager``;
                                                                           ``pytorch-fsdp-accelerate``
                                                                           with FSDP
Lightning      a metrics CSV with ``train|`` columns, or ``Epoch N:``      as HF Trainer
               progress lines
=============  =========================================================  ======================

The stacks are each framework's documented defaults (``perfmodel/data/stacks.yaml``): torchtitan's
``compile.enable`` is false unless set (torchtitan ``job_config``), and it logs "Compiling each
TransformerBlock with torch.compile" when set; HF Trainer and Lightning run DDP with autocast
unless FSDP is configured; NeMo's published runs use its performance recipes. The order matters:
NeMo 1 prints Lightning's progress bar around its own timing, and NeMo runs Megatron-Core.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from perfmodel.spec import limits


@dataclass(frozen=True)
class FrameworkGuess:
    framework: str
    stack: str
    """The ``software.stack`` assumed for the run (``perfmodel/data/stacks.yaml``)."""
    evidence: str
    """What in the log showed the framework."""
    hardware: str | None
    """A catalogue hardware id whose GPU the log names, where it names one."""
    gpu_text: str = ""
    """The GPU name as the log wrote it."""


_FSDP = re.compile(r"\bFSDP|fully_shard|FullyShardedDataParallel")
_RULES = (
    ("NeMo", re.compile(r"train_step_timing in s|\[NeMo [IWE]"), lambda t: "nemo-perf",
     "'train_step_timing in s' or '[NeMo' lines"),
    ("Megatron-LM", re.compile(r"elapsed time per iteration \(ms\)"), lambda t: "megatron-core",
     "'elapsed time per iteration (ms)' lines"),
    ("torchtitan", re.compile(r"\[titan\]|step:\s*\d+\s.*tps:\s*[\d,]+"),
     lambda t: "torchtitan-compile" if re.search(r"Compiling .*torch\.compile|compile\.enable\s*=\s*true", t)
     else "torchtitan-eager", "'[titan]' or 'step: ... tps:' lines"),
    ("HF Trainer", re.compile(r"train_samples_per_second|\*{5} Running training \*{5}"),
     lambda t: "pytorch-fsdp-accelerate" if _FSDP.search(t) else "pytorch-eager",
     "'train_samples_per_second' or '***** Running training *****'"),
    ("Lightning", re.compile(r"^[^\n]*\btrain\|[^\n]*$|^Epoch \d+:", re.MULTILINE),
     lambda t: "pytorch-fsdp-accelerate" if _FSDP.search(t) else "pytorch-eager",
     "a metrics CSV with 'train|' columns or 'Epoch N:' progress lines"),
)
_GPUS = (
    (re.compile(r"\bGB200\b"), "gb200-nvl72"), (re.compile(r"\bGB300\b"), "gb300-nvl72"),
    (re.compile(r"\bB200\b"), "b200"), (re.compile(r"\bB300\b"), "b300"),
    (re.compile(r"\bH200\b"), "h200-sxm"), (re.compile(r"\bH800\b"), "h800-sxm"), (re.compile(r"\bH100\b"), "h100-sxm"),
    (re.compile(r"\bA100[- ]SXM4?[- ]80GB|\bA100 80GB|\bA100-80G"), "a100-sxm-80gb"),
    (re.compile(r"\bA100\b"), "a100-sxm-40gb"),
    (re.compile(r"\bMI300X\b", re.IGNORECASE), "mi300x"), (re.compile(r"\bMI355X\b", re.IGNORECASE), "mi355x"),
)
"""GPU names as drivers report them (``nvidia-smi``, ``torch.cuda.get_device_name``: 'NVIDIA H100 80GB
HBM3', 'NVIDIA A100-SXM4-80GB'; ROCm: 'AMD Instinct MI300X'), most specific first. A bare 'A100'
is the 40 GB part, the catalogue's first A100."""


def infer_framework(text: str) -> FrameworkGuess | None:
    """The framework of a log's text (None where no rule matches), and the GPU it names."""
    if len(text) > limits.MAX_LOG_FILE_BYTES:
        text = text[:limits.MAX_LOG_FILE_BYTES]
    for name, pattern, stack, evidence in _RULES:
        if pattern.search(text):
            hw, gpu_text = None, ""
            for gpu, hw_id in _GPUS:
                m = gpu.search(text)
                if m:
                    hw, gpu_text = hw_id, m.group(0)
                    break
            return FrameworkGuess(name, stack(text), evidence, hw, gpu_text)
    return None


def assumption_line(guess: FrameworkGuess, log_name: str, applied: bool, scenario_stack: str | None,
                    scenario_hardware: str) -> str:
    """One line: what the log showed and what was assumed, and how to change it."""
    head = f"{log_name}: a {guess.framework} log ({guess.evidence})"
    if applied:
        text = (f"{head}: assumed software stack {guess.stack}; name software.stack in the scenario or pass "
                "--stack NAME to change it")
    elif scenario_stack and scenario_stack != guess.stack:
        text = f"{head}: the scenario's stack {scenario_stack} is kept ({guess.framework}'s default would be {guess.stack})"
    else:
        text = f"{head}: stack {scenario_stack or guess.stack}"
    if guess.hardware and guess.hardware != scenario_hardware:
        text += (f"; the log names a {guess.gpu_text} GPU ({guess.hardware}) but the scenario's hardware is "
                 f"{scenario_hardware}: check it")
    return text


AUTO_STACK = "auto"


def with_stack(run, stack: str):
    """The observed run with its scenario's ``software.stack`` set (the scenario's own options kept
    over the stack's)."""
    from perfmodel.spec.observed.measured import ObservedRun
    from perfmodel.spec.scenario import parse_scenario, scenario_to_dict
    d = scenario_to_dict(run.scenario)
    sc = parse_scenario({**d, "software": {**(d.get("software") or {}), "stack": stack}})
    return ObservedRun(id=run.id, scenario=sc, measured=run.measured)


def assume_stack(runs: list, guesses: list, stack: str = AUTO_STACK) -> tuple[list, tuple[str, ...]]:
    """(the runs, one line per log): with ``stack`` ``auto``, runs whose scenario names no stack take
    the stack their logs' framework implies (where every log agrees); with a stack name, every run
    takes it. ``guesses``: (log name, ``FrameworkGuess`` or None) per log."""
    from perfmodel.spec.errors import InputError
    from perfmodel.spec.stacks import list_stacks, unknown_stack_reason
    if stack != AUTO_STACK:
        if stack not in list_stacks():
            raise InputError("--stack", unknown_stack_reason(stack))
        return [with_stack(r, stack) for r in runs], (f"software stack {stack} (from --stack)",)
    known = [g for _, g in guesses if g is not None]
    implied = {g.stack for g in known}
    apply = len(implied) == 1 and bool(known)
    out = [with_stack(r, next(iter(implied))) if apply and r.scenario.software.stack is None else r for r in runs]
    first = runs[0].scenario if runs else None
    lines = tuple(assumption_line(g, name, apply and first is not None and first.software.stack is None,
                                  None if first is None else first.software.stack,
                                  "" if first is None else _hardware_ref(first))
                  for name, g in guesses if g is not None)
    if len(implied) > 1:
        lines += (f"the logs are of several frameworks ({', '.join(sorted(implied))}): no stack assumed",)
    return out, lines


def _hardware_ref(sc) -> str:
    from perfmodel.spec.scenario import hardware_of
    return hardware_of(sc).reference_id
