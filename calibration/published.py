"""``python -m calibration fit-published``: profiles fitted to the published curves.

Reads the project's copy of ``shared/data/microbenchmarks.yaml``
(``calibration/data/microbenchmarks.yaml``; ``$PERFMODEL_MICROBENCHMARKS`` overrides it),
keeps each hardware id's records of trust medium or high (the file's rule: low-trust rows
are sanity bounds only), fits them with ``fit``, and writes
``calibration/profiles/<hardware-id>.yaml``. Groups without published data keep the hardware
spec's defaults, and the profile's ``sources`` say so.

Where the suite has run on the GPU itself (``MEASURED_RUNS``: result files of
``calibration/results/``), its records are fitted together with the published ones, with the
kernel choices and skipped groups the run's entry states and explains.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

from perfmodel.spec.errors import InputError
from perfmodel.spec.hardware import load_hardware

from .fit import SKIPPABLE, Calibration, fit_efficiencies, quality_lines
from .parsers import parse_microbenchmarks
from .profile import write_profile
from .results import load_results, read_mapping

PUBLISHED_HARDWARE = ("h100-sxm", "h200-sxm", "a100-sxm-80gb", "b200", "gb200-nvl72")
SAME_GPU_DIE = {"gb200-nvl72": "b200"}
"""Systems whose GPU is another system's die: GB200's Blackwell GPU is the B200 die (NVIDIA
Blackwell Architecture Technical Brief). Where the system has no published GEMM sweep, it
takes the die's fitted GEMM curve (``borrowed_gemm``)."""
SIBLING_PRECISION = {"fp16": "bf16", "bf16": "fp16", "fp4": "fp8"}
"""A precision with no sweep takes its sibling's fitted efficiency: fp16 and bf16 run at the
same tensor-core rate on every listed GPU; block-scaled fp4 GEMMs use the fp8 kernels'
structure at twice the rate (NVIDIA Blackwell brief), so fp8's fraction is an optimistic
stand-in until an fp4 sweep exists."""
REPO_ROOT = Path(__file__).resolve().parent.parent
PROFILES_DIR = REPO_ROOT / "calibration" / "profiles"
RESULTS_DIR = REPO_ROOT / "calibration" / "results"


@dataclass(frozen=True)
class MeasuredRun:
    """A suite run on the hardware, fitted into its profile, and the fit's choices."""

    files: tuple[str, ...]
    """Result files under ``calibration/results``: every run of the suite on this kind of
    machine, fitted together (two lent machines of one kind differ by a median 2% per point)."""
    attention_impl: str
    grouped_impl: str
    skip: tuple[str, ...]
    why: str


_ATTENTION_WHY = (
    "attention: the suite times FlashAttention-2 (sdpa-flash) and cuDNN (sdpa-cudnn) kernels; the flash "
    "rates are fitted as attention, the cuDNN ones as attention_cudnn (the curve of attention_backend cudnn, "
    "which MaxText's recipe names). Causal, from 4k tokens, flash runs at 0.32-0.34 (forward) and 0.27-0.32 (backward) "
    "of the dense bf16 peak, cuDNN at 0.53-0.56 and 0.46-0.53. Flash agrees with the published FA2 point "
    "(microbenchmarks.yaml attention_fa2_h100). At cuDNN's rates the seven H100 long-sequence rows of the "
    "validation move from -3..+6% to +27..+66% and the H100 error from 11.0% to 22.7%. Transformer Engine "
    "prefers cuDNN on Hopper, so the Megatron-Core stacks' flash curve is a stand-in chosen from those "
    "cases (docs/calibration.md 'Measured on H100 and H200', docs/model.md 'Which fused kernel')")
_LAUNCH_WHY = (
    "launch: the suite's eager one-element op measures the lent machine's host CPU (6.5 to 10.9 us on "
    "three H100 machines of the same kind, 6.4 and 8.9 us on two H200 ones), not a training node's; "
    "host_op_overhead_s keeps its DGX-host source")
_GROUPED_WHY = (
    "expert GEMMs: measured one torch.mm per expert (CUDA-graph timed) and torch._grouped_mm run at dense "
    "rates; they are checked against the dense curve (group grouped_gemm), not fitted: the step model "
    "gives expert GEMMs the dense curve of their per-expert shape")
MEASURED_RUNS = {
    "h100-sxm": MeasuredRun(("nvidia-h100-80gb-hbm3-2026-11-22/results.yaml",
                             "nvidia-h100-80gb-hbm3-2026-11-27/results.yaml",
                             "nvidia-h100-80gb-hbm3-2026-11-27/long_attention.yaml",
                             "nvidia-h100-80gb-hbm3-2026-11-27/clocked_gemm.yaml",
                             "nvidia-h100-80gb-hbm3-2026-11-27/clocked_attention.yaml",
                             "nvidia-h100-80gb-hbm3-2026-11-27-moe/results.yaml"),
                            "sdpa-flash", "torch.mm per expert",
                            ("launch",), f"{_ATTENTION_WHY}; {_GROUPED_WHY}; {_LAUNCH_WHY}"),
    "h200-sxm": MeasuredRun(("nvidia-h200-2026-11-22/results.yaml",
                             "nvidia-h200-2026-11-27/clocked_gemm.yaml",
                             "nvidia-h200-2026-11-27/clocked_attention.yaml"),
                            "sdpa-flash", "torch.mm per expert",
                            ("launch",), f"{_ATTENTION_WHY}; {_GROUPED_WHY}; {_LAUNCH_WHY}"),
}


DATA_COPY = REPO_ROOT / "calibration" / "data" / "microbenchmarks.yaml"


def default_data_path() -> Path:
    """$PERFMODEL_MICROBENCHMARKS, else the project's copy (the package data of ``calibration``)."""
    env = os.environ.get("PERFMODEL_MICROBENCHMARKS")
    if env:
        return Path(env)
    return DATA_COPY


@dataclass(frozen=True)
class PublishedFit:
    hardware_id: str
    calibration: Calibration
    left_out: tuple[str, ...]
    path: Path | None


def borrowed_gemm(donor_fit, donor_spec, recipient_spec):
    """The donor's fitted GEMM curve for a system with the same die but another datasheet peak.

    The two datasheet peaks differ by their boost clocks (B200 2250, GB200 2500 BF16 TFLOP/s),
    but the best measured matmul rates differ less (MAMF table: B200 1745, GB200 1822 BF16;
    3432.5 and 3615.6 FP8). So the fitted fraction of the donor's peak is scaled by the ratio
    of the two systems' measured best fractions (each spec's default ``efficiency_max``, from
    that table): the borrowed curve keeps the donor's shape (``half_dim``) and reaches, at its
    best, the recipient's measured best rate in proportion to the donor's."""
    out = {}
    for p, g in donor_fit.items():
        scale = same_die_scale(donor_spec, recipient_spec, p)
        out[p] = g.model_copy(update={"efficiency_max": min(1.0, g.efficiency_max * scale)})
    return out


def same_die_scale(donor_spec, recipient_spec, precision: str) -> float:
    """Recipient's over donor's measured best fraction of peak (the specs' default
    ``efficiency_max``): the factor ``borrowed_gemm`` applies."""
    return (recipient_spec.efficiency.gemm[precision].efficiency_max
            / donor_spec.efficiency.gemm[precision].efficiency_max)


def fit_published(data_path: Path, hardware_ids=PUBLISHED_HARDWARE, out_dir: Path | None = PROFILES_DIR,
                  min_trust: str = "medium", measured: dict[str, MeasuredRun] | None = None,
                  results_dir: Path = RESULTS_DIR) -> list[PublishedFit]:
    """Fit and (when ``out_dir`` is given) write one profile per hardware id; ``measured``
    (default ``MEASURED_RUNS``; ``{}`` for published data alone) adds suite runs."""
    measured = MEASURED_RUNS if measured is None else measured
    data = read_mapping(Path(data_path))
    name = Path(data_path).name
    out = []
    fitted_gemm: dict[str, tuple] = {}
    donors = [d for d in SAME_GPU_DIE.values() if d not in hardware_ids]
    for hw_id in [*donors, *sorted(hardware_ids, key=lambda h: h in SAME_GPU_DIE)]:
        spec = load_hardware(hw_id)
        pub = parse_microbenchmarks(data, hw_id, origin=name, min_trust=min_trust)
        run = measured.get(hw_id)
        inputs, options, extra = [pub.results], {}, {}
        if run is not None:
            described = []
            for file in run.files:
                res = load_results(Path(results_dir) / file)
                cite = f"calibration/results/{file}"
                inputs.append(res.model_copy(update={"records": tuple(r.model_copy(update={"source": r.source or cite})
                                                                      for r in res.records)}))
                md = res.metadata
                described.append(f"{cite}: {md.device}, driver {md.driver_version}, CUDA {md.cuda_version}, "
                                 f"torch {md.torch_version}, {md.notes}, {md.date}")
            options = {"attention_impl": run.attention_impl, "grouped_impl": run.grouped_impl, "skip": run.skip}
            extra["measured_run"] = f"{'; '.join(described)}. {run.why}"
        cal = fit_efficiencies(inputs, spec, **options,
                               missing_reason=f"no published data of trust >= {min_trust} for {hw_id} in {name}")
        if run is not None:
            cal = _with_cudnn_attention(cal, inputs, spec, extra)
        own = {g.group.split(".", 1)[1] for g in cal.groups if g.group.startswith("gemm.")}
        fitted_gemm[hw_id] = ({p: cal.efficiencies.gemm[p] for p in sorted(own)}, cal.efficiencies.sources)
        if pub.skipped:
            extra["left_out"] = "; ".join(pub.skipped)
        donor = SAME_GPU_DIE.get(hw_id)
        donor_spec = load_hardware(donor) if donor else None
        borrowed = (borrowed_gemm(fitted_gemm[donor][0], donor_spec, spec)
                    if donor in fitted_gemm and not own else {})
        siblings = {p: SIBLING_PRECISION[p] for p in cal.efficiencies.gemm
                    if p not in own | set(borrowed) and SIBLING_PRECISION.get(p) in own | set(borrowed)}
        gemm = {**cal.efficiencies.gemm, **borrowed}
        gemm.update({p: gemm[q] for p, q in siblings.items()})
        cal = Calibration(cal.efficiencies.model_copy(update={"gemm": gemm}), cal.groups)
        for p in borrowed:
            extra[f"gemm.{p}"] = (f"borrowed from {donor} (same GPU die; {hw_id} has no published GEMM sweep), "
                                  f"efficiency_max x {same_die_scale(donor_spec, spec, p):.4f} = the two specs' "
                                  f"MAMF fractions (borrowed_gemm in calibration/published.py): "
                                  + fitted_gemm[donor][1].get(f"gemm.{p}", ""))
        for p, q in siblings.items():
            extra[f"gemm.{p}"] = f"not measured; takes the {q} efficiency (SIBLING_PRECISION in calibration/published.py)"
        if hw_id not in hardware_ids:     # fitted only as a donor
            continue
        path = None
        if out_dir is not None:
            path = write_profile(Path(out_dir) / f"{hw_id}.yaml", hw_id, cal.efficiencies, extra,
                                 quality_lines(cal), field="--out", inputs=(data_path,))
        out.append(PublishedFit(hw_id, cal, pub.skipped, path))
    return out


CUDNN_ATTENTION_IMPL = "sdpa-cudnn"
"""The suite's cuDNN attention records (PyTorch SDPA's cuDNN backend, the cuDNN fused flash
attention that Transformer Engine and JAX's ``cudnn_flash_te`` call)."""


def _with_cudnn_attention(cal: Calibration, inputs: list, spec, extra: dict) -> Calibration:
    """``cal`` with ``attention_cudnn`` fitted to the runs' cuDNN attention records (the same
    fit as the flash curve's, on the other kernel's records), where they have any."""
    if not any(r.kind == "attention" and r.impl == CUDNN_ATTENTION_IMPL for res in inputs for r in res.records):
        return cal
    others = tuple(g for g in SKIPPABLE if g != "attention")
    cudnn = fit_efficiencies(inputs, spec, attention_impl=CUDNN_ATTENTION_IMPL, skip=others)
    extra["attention_cudnn"] = f"{CUDNN_ATTENTION_IMPL} records: {cudnn.efficiencies.sources.get('attention', '')}"
    groups = tuple(dataclasses.replace(g, group="attention_cudnn") for g in cudnn.groups if g.group == "attention")
    return Calibration(cal.efficiencies.model_copy(update={"attention_cudnn": cudnn.efficiencies.attention}),
                       cal.groups + groups)


def require_file(path: Path) -> Path:
    if not Path(path).exists():
        raise InputError("data", f"{path} not found (set PERFMODEL_MICROBENCHMARKS or pass --data)")
    return Path(path)
