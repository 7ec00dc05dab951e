"""What an anchor can carry: an anchored what-if of another stack, precision or model family.

Anchoring measures a stack's offset from the model on the user's runs and carries it to a what-if
(``perfmodel.studies.observed.anchor``). The offset belongs to the software that ran, the precision its
kernels used and the kernels the model's shape calls:

===========  ======================================================================================
differs      what the anchor does
===========  ======================================================================================
stack        flagged: the offset of one stack says nothing of another's (the published runs' stacks
             sit from -11% to +35% from the model, ``perfmodel.studies.observed.bands``), so the what-if
             keeps the unanchored band (with its out-of-family widening) about the anchored figure
precision    flagged in the same way: an fp8 GEMM reaches another share of its peak than a bf16 one
             (the calibrated GEMM curves differ by precision, ``hardware/*.yaml``)
family       refused: a dense model's factor says nothing of grouped expert GEMMs and token
             dispatch, nor a coarse MoE's of a fine-grained one (``perfmodel.engine.band.family_of``)
===========  ======================================================================================

The anchored band itself (``perfmodel/data/anchored_band.yaml``) comes from pairs of runs of one
source, GPU and model, so it is the band of an anchor within its family by construction.
"""

from __future__ import annotations

from perfmodel.engine.band import DEFAULT_STACK, ErrorBand, family_of
from perfmodel.spec.errors import InputError
from perfmodel.spec.scenario import Scenario, model_of


def _traits(sc: Scenario) -> dict:
    return {"stack": sc.software.stack or DEFAULT_STACK, "precision": sc.precision, "family": family_of(model_of(sc))}


def anchor_mismatch(anchors: list[Scenario], what_if: Scenario) -> tuple[str, ...]:
    """The differences that flag the anchored what-if (stack, precision), one line each; an anchor
    of another model family is refused (``InputError`` naming ``anchor``)."""
    want = _traits(what_if)
    lines = []
    for key in ("family", "stack", "precision"):
        got = sorted({_traits(a)[key] for a in anchors})
        if got == [want[key]]:
            continue
        ran = ", ".join(got)
        if key == "family":
            raise InputError("anchor", f"the anchor ran model family {ran}, the what-if is {want[key]}: a factor "
                                       "fitted on one family's kernels does not carry to another's; anchor on a run "
                                       "of the same family")
        lines.append(f"anchor ran {key} {ran}, the what-if {want[key]}: its offset need not carry across "
                     f"{key}s, so the band is widened to the unanchored band about the anchored figure")
    return tuple(lines)


def widened_band(anchored: dict, plain: ErrorBand | None, tokens_per_s_per_gpu: float, step_time_s: float) -> dict:
    """The anchored band or the plain band (``plain``, about the anchored figures), whichever is
    wider at each end."""
    if plain is None:
        return anchored
    other = {"tokens_per_s_per_gpu": plain.rate(tokens_per_s_per_gpu), "step_time_s": plain.duration(step_time_s)}
    return {k: {"p10": min(v["p10"], other[k]["p10"]), "p50": v["p50"], "p90": max(v["p90"], other[k]["p90"])}
            for k, v in anchored.items()}
