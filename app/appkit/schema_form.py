"""Widgets generated from a pydantic schema: one ``Option`` per field of a frozen model.

A field becomes a checkbox (a bool), a selectbox (a ``Literal``), a multiselect (a ``Literal`` or
a tuple of ``Literal``), a number input (an int or a float, with the field's ``ge``/``gt``/``le``
as bounds) or a text input (a string, with its ``max_length``); its default is the field's, its
label is made from its name and its help is its attribute docstring's first sentence. A ``Look``
may give the field a shorter label, its own help, a step, a sidebar group, a widget key, a scale
(the widget shows field / scale), choices from a registry, or the word a select shows for None.
A field whose type holds another model (the hardware, the model, the software stack) has widgets
of its own and is left out. ``appkit.software_form`` and ``appkit.job_form`` use this for the
software stack and for the scenario, its parallelism and its custom model; no Streamlit here.
"""

from __future__ import annotations

import ast
import functools
import inspect
import re
import textwrap
import types
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Annotated, Literal, Union, get_args, get_origin

from pydantic import BaseModel

from perfmodel.spec.errors import InputError

FLOAT_STEP = 0.05


@dataclass(frozen=True)
class Look:
    """How the sidebar presents one field; a part left None comes from the schema."""

    label: str | None = None
    help: str | None = None
    group: str | None = None
    step: float | None = None
    key: str | None = None            # the widget key, if not the field's name (with the form's prefix)
    scale: float | None = None        # field value = widget value x scale (e.g. 1e9: billions)
    min_value: float | None = None    # a lower bound below the field's (0 reaches the one-line error)
    choices: Callable[[], tuple] | None = None   # a select's choices from a registry (a str field)
    none_choice: str | None = None    # the select's word for None
    read: str | None = None           # the attribute whose value the widget shows (a resolved default)
    wide: bool = False                # a row of its own in the sidebar
    row: int = 0                      # starts a row of this many columns (0: goes on in the current row)
    fmt: str | None = None            # a number input's printf format ("%.3e")


@dataclass(frozen=True)
class Option:
    """One field's widget: ``name`` is the field's name, ``key`` the widget's."""

    name: str
    key: str
    kind: str               # "checkbox", "select", "multiselect", "int", "float" or "text"
    label: str
    help: str
    group: str
    default: object         # the widget value of the field's default (None: the field has none)
    choices: tuple = ()
    singles: tuple = ()     # multiselect: the choices the field takes as one name, not a list
    alone: tuple = ()       # multiselect: those that never combine with others (a whole policy)
    min_value: float | None = None
    max_value: float | None = None
    step: float | None = None
    max_chars: int | None = None
    optional: bool = False  # None is 0 (numbers), "" (text) or ``none_choice`` (select)
    scale: float = 1.0
    none_choice: str | None = None
    read: str | None = None
    wide: bool = False
    row: int = 0
    fmt: str | None = None
    field: str = ""         # the dotted name an error names (``software.x``, ``parallelism.tp``)

    def to_widget(self, value):
        """The field's value as this widget's value."""
        if self.kind == "multiselect":
            return [value] if isinstance(value, str) else list(value)
        if value is None:
            return {"checkbox": False, "int": 0, "float": 0.0, "text": "", "select": self.none_choice}.get(self.kind)
        if self.scale != 1.0:
            return value / self.scale
        return {"checkbox": bool, "int": int, "float": float}.get(self.kind, lambda x: x)(value)

    def from_widget(self, value):
        """The widget's value as the field's, or InputError naming the field."""
        if self.kind == "checkbox":
            return bool(value)
        if self.kind == "int":
            return int(value) or (None if self.optional else 0)
        if self.kind == "float":
            out = float(value) * self.scale
            return out or (None if self.optional else 0.0)
        if self.kind == "text":
            return str(value).strip() or None
        if self.kind == "multiselect":
            return self._chosen(list(value))
        return None if self.none_choice is not None and value == self.none_choice else value

    def _chosen(self, chosen: list):
        alone = [c for c in chosen if c in self.alone]
        if alone and len(chosen) > 1:
            raise InputError(self.field or self.name, f"{alone[0]} is a whole policy on its own; it does not "
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


def holds_model(annotation) -> bool:
    """Whether a field's type holds another model (drawn by widgets of its own)."""
    members, _ = _union_args(annotation)
    return any(isinstance(b, type) and issubclass(b, BaseModel) for b, _ in map(_strip, members))


@functools.lru_cache(maxsize=64)
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
    raise TypeError(f"field {name}: no widget for {annotation!r}")


def _label(name: str, kind: dict) -> str:
    words = name.replace("_", " ")
    label = words[:1].upper() + words[1:]
    return f"{label} (0 = none)" if kind.get("optional") and kind["kind"] in ("int", "float") else label


def _with_look(opt: Option, look: Look) -> Option:
    """The option as ``look`` changes it: bounds and the step scaled, choices from a registry."""
    if look.choices is not None:
        none = (look.none_choice,) if look.none_choice is not None else ()
        opt = replace(opt, kind="select", choices=none + tuple(look.choices()), none_choice=look.none_choice)
    if look.scale is not None:
        opt = replace(opt, scale=look.scale, min_value=None if opt.min_value is None else opt.min_value / look.scale,
                      max_value=None if opt.max_value is None else opt.max_value / look.scale)
    if look.min_value is not None:
        opt = replace(opt, min_value=type(opt.min_value or 0)(look.min_value))
    return replace(opt, step=opt.step if look.step is None else look.step, read=look.read, row=look.row, fmt=look.fmt,
                   wide=look.wide or opt.kind in ("multiselect", "text"))


def field_options(model: type[BaseModel], looks: dict[str, Look], default_group: str, *, prefix: str = "",
                  skip: tuple[str, ...] = (), path: str = "") -> tuple[Option, ...]:
    """Every field of ``model`` but ``skip`` and those holding models, as widgets: those ``looks``
    names in its order, then the others in the schema's. A widget's key is ``prefix`` + the
    field's name unless its look gives one."""
    docs = attribute_docs(model)
    names = [n for n in model.model_fields if n not in skip and not holds_model(model.model_fields[n].annotation)]
    out = []
    for name in [n for n in looks if n in names] + [n for n in names if n not in looks]:
        info = model.model_fields[name]
        kind = _kind(name, info.annotation if not info.metadata else Annotated[(info.annotation, *info.metadata)])
        look = looks.get(name, Look())
        opt = Option(name=name, key=look.key or prefix + name, label=look.label or _label(name, kind),
                     help=look.help or first_sentence(docs.get(name, "")), group=look.group or default_group,
                     default=None, field=path + name, **kind)
        opt = _with_look(opt, look)
        default = info.get_default(call_default_factory=True)
        out.append(replace(opt, default=None if info.is_required() else opt.to_widget(default)))
    return tuple(out)


def read_values(obj: BaseModel, opts: tuple[Option, ...]) -> dict:
    """Each option's widget value for ``obj`` (its ``read`` attribute where it names one)."""
    return {o.key: o.to_widget(getattr(obj, o.read or o.name)) for o in opts}


def field_values(v: dict, opts: tuple[Option, ...]) -> dict:
    """The fields from widget values (a missing widget gives the field's default, a required
    field's widget must be there; an emptied text that may not be None is left to its default),
    or InputError naming the field."""
    out = {o.name: o.from_widget(v[o.key] if o.default is None else v.get(o.key, o.default)) for o in opts}
    return {k: x for (k, x), o in zip(out.items(), opts) if x is not None or o.optional or o.kind != "text"}
