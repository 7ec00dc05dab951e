"""The job editor's software options, generated from the ``SoftwareStack`` schema.

Each field of the stack (but ``stack`` and ``overlap``, drawn on their own) becomes one
``Option``: its widget (checkbox for a bool, selectbox for a ``Literal``, multiselect for a
``Literal`` or a tuple of ``Literal``, number input for an int or a float, text input for a
string), its bounds (the field's ``ge``/``gt``/``le``), its choices, its default, and its label
and help from the field's attribute docstring. ``software_labels.LOOKS`` may give an option a
shorter label, its own help, a step or a sidebar group; an option it does not name is drawn
with a label made from its name, the first sentence of its docstring as help, in the
"Software stack" group. A new software option therefore appears in the app with no app code.
No Streamlit here: ``appkit.sidebar`` draws the options.
"""

from __future__ import annotations

import ast
import functools
import inspect
import re
import textwrap
import types
from dataclasses import dataclass, replace
from typing import Annotated, Literal, Union, get_args, get_origin

from pydantic import BaseModel

from perfmodel.spec.errors import InputError
from perfmodel.spec.software import SoftwareStack

from .software_labels import DEFAULT_GROUP, LOOKS, Look

DRAWN_APART = ("stack", "overlap")
"""Fields with widgets of their own: the preset selector and the per-kind overlap fractions."""
FLOAT_STEP = 0.05


@dataclass(frozen=True)
class Option:
    """One software option's widget: ``key`` is the field's name and the widget's key."""

    key: str
    kind: str               # "checkbox", "select", "multiselect", "int", "float" or "text"
    label: str
    help: str
    group: str
    default: object         # the widget value of the field's default
    choices: tuple = ()
    singles: tuple = ()     # multiselect: the choices the field takes as one name, not a list
    alone: tuple = ()       # multiselect: those that never combine with others (a whole policy)
    min_value: float | None = None
    max_value: float | None = None
    step: float | None = None
    max_chars: int | None = None
    optional: bool = False  # None is 0 (numbers) or "" (text)

    def to_widget(self, value):
        """The field's value as this widget's value."""
        if self.kind == "multiselect":
            return [value] if isinstance(value, str) else list(value)
        if value is None:
            return {"int": 0, "float": 0.0, "text": ""}[self.kind]
        return {"checkbox": bool, "int": int, "float": float}.get(self.kind, lambda x: x)(value)

    def from_widget(self, value):
        """The widget's value as the field's, or InputError naming the field."""
        if self.kind == "checkbox":
            return bool(value)
        if self.kind == "int":
            return int(value) or (None if self.optional else 0)
        if self.kind == "float":
            return float(value) or (None if self.optional else 0.0)
        if self.kind == "text":
            return str(value).strip() or None
        if self.kind == "multiselect":
            return self._chosen(list(value))
        return value

    def _chosen(self, chosen: list):
        alone = [c for c in chosen if c in self.alone]
        if alone and len(chosen) > 1:
            raise InputError(f"software.{self.key}", f"{alone[0]} is a whole policy on its own; it does not "
                                                     "combine with other choices")
        if len(chosen) == 1 and chosen[0] in self.singles:
            return chosen[0]
        return tuple(chosen)


def _union_args(tp) -> tuple[tuple, bool]:
    """The members of a union (or the type alone) without None, and whether None was one."""
    if get_origin(tp) in (Union, types.UnionType):
        args = get_args(tp)
        return tuple(a for a in args if a is not type(None)), type(None) in args
    return (tp,), False


def _strip(tp) -> tuple[object, list]:
    """An ``Annotated`` type's base and its metadata (constraints such as ``Gt``, ``Le``)."""
    meta: list = []
    while get_origin(tp) is Annotated:
        tp, *extra = get_args(tp)
        meta.extend(extra)
    out = []
    for m in meta:   # a pydantic Field inside Annotated carries its constraints in .metadata
        out.extend(getattr(m, "metadata", None) or [m])
    return tp, out


def _bound(meta: list, name: str):
    return next((getattr(m, name) for m in meta if getattr(m, name, None) is not None), None)


@functools.lru_cache(maxsize=32)
def attribute_docs(model: type[BaseModel]) -> dict[str, str]:
    """Each field's attribute docstring (the string under it in the class body), over the MRO."""
    docs: dict[str, str] = {}
    for klass in reversed(model.__mro__):
        if not (isinstance(klass, type) and issubclass(klass, BaseModel)) or klass is BaseModel:
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for stmt, nxt in zip(body, body[1:]):
            if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                    and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)
                    and isinstance(nxt.value.value, str)):
                docs[stmt.target.id] = inspect.cleandoc(nxt.value.value)
    return docs


def first_sentence(doc: str) -> str:
    """A docstring's first sentence, on one line (the generated help)."""
    text = " ".join(doc.split())
    end = re.search(r"\.\s+(?=[A-Z])", text)
    return text if end is None else text[: end.start() + 1]


def _kind(name: str, annotation) -> dict:
    """The widget's kind, choices and bounds for one field's annotation."""
    members, optional = _union_args(annotation)
    bases = [_strip(m) for m in members]
    literals = [b for b, _ in bases if get_origin(b) is Literal]
    tuples = [b for b, _ in bases if get_origin(b) is tuple]
    if tuples:
        singles = tuple(c for lit in literals for c in get_args(lit))
        items = get_args(get_args(tuples[0])[0]) if get_origin(get_args(tuples[0])[0]) is Literal else ()
        only = tuple(c for c in singles if c not in items)
        return {"kind": "multiselect", "choices": only + tuple(items), "singles": singles, "alone": only}
    if literals:
        return {"kind": "select", "choices": tuple(c for lit in literals for c in get_args(lit))}
    base, meta = bases[0]
    if base is bool:
        return {"kind": "checkbox"}
    if base is str:
        return {"kind": "text", "max_chars": _bound(meta, "max_length"), "optional": optional}
    if base in (int, float):
        low = _bound(meta, "ge")
        if low is None and _bound(meta, "gt") is not None:
            low = _bound(meta, "gt") + (1 if base is int else 0)
        if optional:
            low = 0
        high = _bound(meta, "le")
        cast = int if base is int else float
        return {"kind": base.__name__, "optional": optional, "min_value": None if low is None else cast(low),
                "max_value": None if high is None else cast(high), "step": 1 if base is int else FLOAT_STEP}
    raise TypeError(f"software option {name}: no widget for {annotation!r}")


def _label(name: str, kind: dict) -> str:
    words = name.replace("_", " ")
    label = words[:1].upper() + words[1:]
    return f"{label} (0 = none)" if kind.get("optional") and kind["kind"] in ("int", "float") else label


@functools.lru_cache(maxsize=32)
def options(model: type[SoftwareStack] = SoftwareStack) -> tuple[Option, ...]:
    """Every software option of ``model`` as a widget: those ``LOOKS`` names in its order, then
    the others in the schema's."""
    docs = attribute_docs(model)
    named = [n for n in LOOKS if n in model.model_fields]
    out = []
    for name in named + [n for n in model.model_fields if n not in LOOKS and n not in DRAWN_APART]:
        info = model.model_fields[name]
        kind = _kind(name, info.annotation if not info.metadata else Annotated[(info.annotation, *info.metadata)])
        look = LOOKS.get(name, Look())
        opt = Option(key=name, label=look.label or _label(name, kind), help=look.help or first_sentence(
            docs.get(name, "")), group=look.group or DEFAULT_GROUP, default=None, **kind)
        if look.step is not None:
            opt = replace(opt, step=look.step)
        out.append(replace(opt, default=opt.to_widget(info.get_default(call_default_factory=True))))
    return tuple(out)


def group_options(group: str, model: type[SoftwareStack] = SoftwareStack) -> tuple[Option, ...]:
    return tuple(o for o in options(model) if o.group == group)


def widget_values(sw: SoftwareStack, model: type[SoftwareStack] = SoftwareStack) -> dict:
    """Every option's widget value for ``sw``."""
    return {o.key: o.to_widget(getattr(sw, o.key)) for o in options(model)}


def software_values(v: dict, model: type[SoftwareStack] = SoftwareStack) -> dict:
    """The options' part of the ``software:`` mapping from widget values (a missing widget gives
    its default), or InputError naming the field."""
    return {o.key: o.from_widget(v.get(o.key, o.default)) for o in options(model)}
