"""The shared published runs as written, with only a named software stack added per case.

    python scripts/stack_cases.py [CASES] [--out FILE] [--no-stacks]

Reads a ``perfmodel-cases/1`` file (default: the shared ``../shared/data/published_runs.yaml``),
adds ``software: {stack: NAME}`` to every runnable case from its own source (the framework and
release the source names) through ``STACK_RULES`` below, and nothing else, then validates it and
prints the mean absolute error on tokens/s per GPU overall, per GPU type and for what-ifs. The
question it answers: how close does perfmodel get when a user states only which framework ran
the job? ``--no-stacks`` validates the file exactly as written (every case on the default
stack), ``--out`` writes the stacked file.

The rules, first match wins; each names the stack and the words of the case's source (or, for
the torchtitan report, of the table the row comes from) that decide it:

=====================================================  ========================  ===============================
source starts with / row                               stack                     why
=====================================================  ========================  ===============================
Narayanan et al. ... Table 1 (weak scaling)            megatron-lm-2021          Megatron-LM v2 runs (SC21)
Narayanan et al. 2021 ... Table 2, ZeRO-3 rows         deepspeed-zero3-2021      Table 2's ZeRO-3 baseline is
                                                                                 DeepSpeed v0.3 (spring 2021)
Narayanan et al. 2021 ... Table 2, PTD-P rows          megatron-lm-2021          Megatron-LM v2 runs
NeMo Framework Performance Summary - NeMo 24.07        megatron-core             NeMo 1 launcher configs
NeMo Framework Performance Summary - NeMo 25.0x        nemo-perf                 NeMo 2 performance recipes
NeMo Long Sequence Performance, NeMo 24.03.01 tables   megatron-core             NeMo 1 container
NeMo Long Sequence Performance, NeMo 25.04 tables      nemo-perf                 NeMo 2 container
NeMo Megatron-Bridge Performance Summary - 25.09,      megatron-bridge-25.09,    scripts/performance recipes,
  25.11, 26.04.01, 26.06 containers                    -25.11, -26.04, -26.06    with the container's TE release
NeMo Megatron-Bridge Performance Summary (other)       megatron-bridge-perf      scripts/performance recipes
DGX Cloud Benchmarking recipes, MaxText/JAX tables     maxtext                   maxtext/ recipe
DGX Cloud Benchmarking recipes, other tables           nemo-perf                 NeMo performance configs
                                                                                 (v25.03 NeMo 1, v25.05 NeMo 2)
PyTorch torchtitan benchmark report (end of 2024),     torchtitan-2412-eager     the 'FSDP' rows of Tables 1 and
  rows without torch.compile (ids ending _fsdp)                                  3 (no torch.compile)
PyTorch torchtitan benchmark report (end of 2024),     torchtitan-2412-compile   '+ torch.compile' rows and
  every other row                                                                Tables 2, 4-6 (torch.compile)
torchtitan benchmark by Trainy (June 2025)             torchtitan-compile        --training.compile, e7c0cae
=====================================================  ========================  ===============================
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared" / "data" / "published_runs.yaml"

STACK_RULES: tuple[tuple[str, str, str], ...] = (
    # (source prefix, extra condition on the case, stack)
    ("Narayanan et al., Efficient Large-Scale Language Model Training", "", "megatron-lm-2021"),
    ("Narayanan et al. 2021 (arXiv 2104.04473) — Table 2", "id:ZeRO-3", "deepspeed-zero3-2021"),
    ("Narayanan et al. 2021 (arXiv 2104.04473) — Table 2", "", "megatron-lm-2021"),
    ("NVIDIA NeMo Framework Performance Summary - NeMo 24.07", "", "megatron-core"),
    ("NVIDIA NeMo Framework Performance Summary - NeMo 25.", "", "nemo-perf"),
    ("NVIDIA NeMo Long Sequence Performance", "source:NeMo 24.03", "megatron-core"),
    ("NVIDIA NeMo Long Sequence Performance", "source:NeMo 25.04", "nemo-perf"),
    ("NVIDIA NeMo Megatron-Bridge Performance Summary - 25.09 ", "", "megatron-bridge-25.09"),
    ("NVIDIA NeMo Megatron-Bridge Performance Summary - 25.11 ", "", "megatron-bridge-25.11"),
    ("NVIDIA NeMo Megatron-Bridge Performance Summary - 26.04", "", "megatron-bridge-26.04"),
    ("NVIDIA NeMo Megatron-Bridge Performance Summary - 26.06 ", "", "megatron-bridge-26.06"),
    ("NVIDIA NeMo Megatron-Bridge Performance Summary", "", "megatron-bridge-perf"),
    ("NVIDIA DGX Cloud Benchmarking recipes", "source:MaxText/JAX", "maxtext"),
    ("NVIDIA DGX Cloud Benchmarking recipes", "", "nemo-perf"),
    ("PyTorch torchtitan benchmark report (end of 2024)", "id-ends:_fsdp", "torchtitan-2412-eager"),
    ("PyTorch torchtitan benchmark report (end of 2024)", "", "torchtitan-2412-compile"),
    ("torchtitan benchmark by Trainy (June 2025)", "", "torchtitan-compile"),
)


def _matches(case: dict, prefix: str, condition: str) -> bool:
    source = str(case.get("source", ""))
    if not source.startswith(prefix):
        return False
    if not condition:
        return True
    kind, _, text = condition.partition(":")
    if kind == "id":
        return text in case["id"]
    if kind == "id-ends":
        return case["id"].endswith(text)
    return text in source   # "source:"


def stack_of(case: dict) -> str:
    """The stack of a case, from its source; a source no rule covers is an error, so a new
    publication is mapped on purpose."""
    for prefix, condition, stack in STACK_RULES:
        if _matches(case, prefix, condition):
            return stack
    raise SystemExit(f"{case['id']}: no stack rule matches its source {str(case.get('source', ''))[:100]!r}")


def with_stacks(cases: list[dict]) -> list[dict]:
    """The cases with ``software: {stack: ...}`` added to each runnable scenario (a copy)."""
    out = []
    for case in cases:
        case = copy.deepcopy(case)
        s = case.get("scenario")
        if s:
            if s.get("software"):
                raise SystemExit(f"{case['id']}: already has software options; this script adds the stack only")
            s["software"] = {"stack": stack_of(case)}
        out.append(case)
    return out


def summary(report) -> list[str]:
    lines = [f"overall {report.mape():.2%} over {len(report.results)} runs"]
    for gpu, row in report.by_gpu().items():
        lines.append(f"  {gpu:<14} {row['cases']:>4} runs  {row['mape']:.2%}")
    w = report.what_if()
    lines.append(f"what-if mean {w['mean']:.2%}, median {w['median']:.2%} over {w['pairs']} pairs")
    return lines


def main(argv=None) -> int:
    import yaml

    import perfmodel as pm
    from perfmodel.studies.observed.validation import load_cases

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="?", default=str(SHARED))
    ap.add_argument("--out", help="write the stacked cases here")
    ap.add_argument("--no-stacks", action="store_true", help="validate the file as written")
    args = ap.parse_args(argv)
    cases = load_cases(args.cases)
    if not args.no_stacks:
        cases = with_stacks(cases)
    if args.out:
        Path(args.out).write_text(yaml.safe_dump({"format": "perfmodel-cases/1", "cases": cases},
                                                 sort_keys=False, allow_unicode=True, width=120))
    print("\n".join(summary(pm.validate(cases))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
