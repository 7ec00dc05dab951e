"""The diagnostic reasoning of /work/shared/LENSES.md as data: symptoms, terms, and what to do.

``SYMPTOMS`` is the table 'from symptom to next step': what a user observes, the constraint that
most likely dominates, the recurring patterns it belongs to, what to measure next and the usual
action. A row with a ``detector`` is checked on measured runs by ``perfmodel.studies.observed.diagnose``
(``detect_symptoms``); the others are judgments no log shows, kept so the table is whole.

``TERMS`` gives each step-breakdown component (``perfmodel.engine.evaluate.COMPONENTS``, plus
``memory_bandwidth``, the name of compute bound by HBM) the words a ranked cause needs: a label,
its patterns, the next measurement that would confirm it and the usual action. Its lens is the
engine's (``perfmodel.engine.evaluate.LENS``), so a cause and a bottleneck never disagree.

The six patterns, numbered as in LENSES.md: 1 bottlenecks move, they do not vanish; 2 amortisation
defines scalability; 3 throughput, parallel efficiency and time to solution are different
answers; 4 bigger workloads scale better, but cost more; 5 optimisation has costs beyond speed;
6 cost is a first-class constraint.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfmodel.engine.evaluate import LENS

PATTERNS = {
    1: "bottlenecks move, they do not vanish",
    2: "amortisation defines scalability",
    3: "throughput, parallel efficiency and time to solution are different answers",
    4: "bigger workloads scale better, but cost more",
    5: "optimisation has costs beyond speed",
    6: "cost is a first-class constraint",
}


@dataclass(frozen=True)
class Symptom:
    key: str
    observed: str
    constraint: str
    patterns: tuple[int, ...]
    measure_next: str
    action: str
    lens: str
    detector: bool
    """Whether ``diagnose`` checks this row on measured runs."""

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("key", "observed", "constraint", "lens", "measure_next", "action")} | {
            "patterns": list(self.patterns)}


SYMPTOMS = (
    Symptom("gpu_idle", "the GPUs sit idle for much of the step while the host works", "the input pipeline "
            "(loading and preprocessing)", (1,), "the data loader's wait per step, CPU use, the storage read rate",
            "more loader workers, prefetching, I/O overlapped with compute", "balanced pipeline", True),
    Symptom("batch_plateau", "throughput per GPU stops rising as the batch grows", "memory bandwidth or a "
            "saturated stage", (1, 2), "HBM bandwidth use and a kernel timeline",
            "stop growing the batch; fix the kernel or accept the limit", "co-design", True),
    Symptom("gpus_buy_little", "more GPUs raise throughput but barely shorten the step", "fixed costs that do not "
            "shrink with more GPUs", (2, 3), "the step split into compute, communication and overheads",
            "reconsider the scale and judge it by time to solution", "scale serves purpose", True),
    Symptom("efficiency_drops", "parallel efficiency falls sharply as GPUs are added", "communication and "
            "synchronisation", (1, 4), "the gradient reduce time and the network's use",
            "fewer GPUs, more work per GPU, or another parallel layout", "scale serves purpose", True),
    Symptom("slow_start", "the first iterations are much slower than the rest", "compilation and start-up",
            (2,), "the time of each iteration over the run", "keep such optimisations for long runs",
            "amortisation", True),
    Symptom("fragile", "faster, but the setup became fragile", "over-specialisation", (5,),
            "the engineering and debugging effort", "prefer simpler changes with predictable gains", "co-design",
            False),
    Symptom("big_scales_better", "larger models scale better than small ones", "better amortisation", (4,),
            "the ratio of compute to communication", "accept the higher cost only if it serves the goal",
            "amortisation", False),
    Symptom("fastest_costliest", "the fastest configuration is also the most expensive", "cost and purpose pull "
            "apart", (6,), "the cost per run or per token", "choose by budget and objective, not by peak speed",
            "scale serves purpose", False),
    Symptom("metric_flips", "the conclusion changes with the metric", "the metric does not match the purpose",
            (3,), "throughput, efficiency and time to solution together", "state the objective, then judge again",
            "scale serves purpose", False),
)
SYMPTOM = {s.key: s for s in SYMPTOMS}


@dataclass(frozen=True)
class TermAdvice:
    label: str
    patterns: tuple[int, ...]
    measure_next: str
    action: str


TERMS = {
    "compute": TermAdvice("compute: the GEMM and attention kernels reach less of peak than calibrated", (1, 5),
                          "a kernel timeline of one step: GEMM and attention time against their roofline",
                          "check the precision, attention backend and fusions the stack runs; try a newer release"),
    "memory_bandwidth": TermAdvice("memory-bound kernels (HBM bandwidth)", (1, 2),
                                   "HBM bandwidth use and a kernel timeline",
                                   "fuse element-wise kernels or grow the micro-batch; else accept the limit"),
    "recompute": TermAdvice("activation recomputation", (5,), "the backward time with and without recomputation",
                            "recompute less (selective recomputation) where memory allows"),
    "tp_comm": TermAdvice("exposed tensor-parallel communication", (1, 4),
                          "TP all-gather and reduce-scatter time in a kernel timeline; nccl-tests inside one node",
                          "lower tp, or overlap TP communication with the GEMMs"),
    "cp_comm": TermAdvice("exposed context-parallel communication", (1, 4),
                          "the ring attention's send and receive time", "lower cp, or overlap it with attention"),
    "ep_comm": TermAdvice("exposed expert-parallel all-to-all", (1, 4), "dispatch and combine time per MoE layer",
                          "keep expert parallelism inside the NVLink domain; overlap dispatch with compute"),
    "fsdp_comm": TermAdvice("exposed FSDP parameter gathers", (2,), "the all-gather time per layer",
                            "prefetch further ahead, grow the micro-batch, or shard less (ZeRO-1 or 2)"),
    "pp_comm": TermAdvice("exposed pipeline sends and receives", (1,),
                          "the pipeline send and receive timers (forward-recv, backward-send)",
                          "overlap the sends; keep neighbouring stages in one NVLink domain"),
    "pipeline_bubble": TermAdvice("the pipeline bubble", (1, 2), "idle time per stage; the pipeline timers",
                                  "more micro-batches per step, an interleaved schedule, fewer or balanced stages"),
    "dp_comm": TermAdvice("exposed data-parallel communication", (2,),
                          "the gradient reduce time (Megatron-LM's all-grads-sync timer)",
                          "raise the micro-batches per step, or overlap the reduce with the backward"),
    "offload": TermAdvice("activation offload copies", (5,), "host-device copy time", "offload fewer layers"),
    "optimizer": TermAdvice("the optimizer step", (2,), "the optimizer timer",
                            "shard the optimizer (distributed optimizer) or grow the batch"),
    "overheads": TermAdvice("host dispatch and per-step synchronisation", (2,),
                            "GPU idle gaps between kernels in a timeline; CPU use of the training process",
                            "CUDA graphs (software.cuda_graphs: true predicts it) or torch.compile, fewer and "
                            "larger kernels, larger micro-batches"),
    "data_wait": TermAdvice("the input pipeline", (1,), "the data loader's wait per step, CPU use, storage read rate",
                            "more loader workers, prefetching, I/O overlapped with compute"),
}


def term_lens(term: str) -> str:
    return LENS.get(term, "")
