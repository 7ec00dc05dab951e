"""The job editor's own fields, generated from the schema: the scenario's (GPUs, sequence length,
batch, training tokens, precision, recompute, name), its ``Parallelism`` (tp, pp, vpp, schedule,
cp, ep, etp, ZeRO stage, SP) and a custom ``ModelSpec`` with its ``MoeSpec``.

Each field is one ``schema_form.Option``; ``job_labels`` gives the shorter words. A field added
to the scenario, its parallelism or the model (in a subclass, as a test does) gets its widget,
bounds, default and help with no app code: the scenario's in "Batch and precision", the
parallelism's in "Cluster and layout", the model's in "Model". No Streamlit here.
"""

from __future__ import annotations

import functools

from perfmodel.spec.model import ModelSpec, MoeSpec
from perfmodel.spec.scenario import Scenario

from .job_labels import BATCH, CLUSTER, DENSE_MOE, MODEL, MODEL_LOOKS, MOE, MOE_LOOKS, PARALLEL_LOOKS, SCENARIO_LOOKS
from .schema_form import Option, field_options, field_values, read_values

MODEL_PREFIX = "m_"
"""Widget keys of the custom model's fields (``m_num_layers``), apart from the scenario's."""


def _parallelism_model(model: type[Scenario]):
    return model.model_fields["parallelism"].annotation


def _moe_model(model: type[ModelSpec]):
    return next(m for m in model.model_fields["moe"].annotation.__args__ if m is not type(None))


def options(model: type[Scenario] = Scenario) -> tuple[Option, ...]:
    """The scenario's and its parallelism's fields as widgets (built on each call, so the
    schedule's choices include a schedule registered since)."""
    return (field_options(model, SCENARIO_LOOKS, BATCH)
            + field_options(_parallelism_model(model), PARALLEL_LOOKS, CLUSTER, path="parallelism."))


def group_options(group: str, model: type[Scenario] = Scenario) -> tuple[Option, ...]:
    return tuple(o for o in options(model) if o.group == group)


def group_keys(group: str, model: type[Scenario] = Scenario) -> frozenset:
    return frozenset(o.key for o in group_options(group, model))


def _split(model: type[Scenario]) -> tuple[tuple[Option, ...], tuple[Option, ...]]:
    opts = options(model)
    return tuple(o for o in opts if o.field.startswith("parallelism.")), tuple(
        o for o in opts if not o.field.startswith("parallelism."))


def widget_values(sc: Scenario, model: type[Scenario] = Scenario) -> dict:
    """The widget values of the scenario's own fields and its parallelism's."""
    par, own = _split(model)
    return {**read_values(sc, own), **read_values(sc.parallelism, par)}


def scenario_values(v: dict, model: type[Scenario] = Scenario) -> dict:
    """The scenario's own fields and its ``parallelism`` mapping from widget values, or InputError."""
    par, own = _split(model)
    return {**field_values(v, own), "parallelism": field_values(v, par)}


# ------------------------------------------------------------------------------ custom model
@functools.lru_cache(maxsize=32)
def model_options(model: type[ModelSpec] = ModelSpec) -> tuple[Option, ...]:
    """A custom model's fields as widgets (keys ``m_<field>``): the model's, then its experts'
    in their own caption (0 experts = dense); MLA is not drawn (an MLA model stays uploaded)."""
    return (field_options(model, MODEL_LOOKS, MODEL, prefix=MODEL_PREFIX)
            + field_options(_moe_model(model), MOE_LOOKS, MOE, prefix=MODEL_PREFIX, path="moe."))


def model_widget_values(m: ModelSpec, model: type[ModelSpec] = ModelSpec) -> dict:
    """Custom-model widget values for a model spec."""
    own = tuple(o for o in model_options(model) if o.group != MOE)
    moe = tuple(o for o in model_options(model) if o.group == MOE)
    out = read_values(m, own)
    if m.moe is not None:
        return {**out, **read_values(m.moe, moe)}
    dense = {"expert_ffn_hidden_size": m.ffn_hidden_size, **DENSE_MOE}
    return {**out, **{o.key: dense.get(o.name, o.default) for o in moe}}


def model_from_values(v: dict, model: type[ModelSpec] = ModelSpec) -> dict:
    """The custom-model widgets as a model mapping (no ``moe`` when it has no experts)."""
    own = tuple(o for o in model_options(model) if o.group != MOE)
    moe = tuple(o for o in model_options(model) if o.group == MOE)
    data = {k: x for k, x in field_values(v, own).items() if x is not None}
    experts = field_values(v, moe)
    if experts.get("num_experts"):
        data["moe"] = {k: x for k, x in experts.items() if x is not None}
    return data
