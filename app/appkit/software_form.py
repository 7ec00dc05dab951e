"""The job editor's software options, generated from the ``SoftwareStack`` schema.

Each field of the stack (but ``stack`` and ``overlap``, drawn on their own) becomes one
``Option`` (``appkit.schema_form``): its widget (checkbox for a bool, selectbox for a
``Literal``, multiselect for a ``Literal`` or a tuple of ``Literal``, number input for an int or
a float, text input for a string), its bounds (the field's ``ge``/``gt``/``le``), its choices,
its default, and its label and help from the field's attribute docstring.
``software_labels.LOOKS`` may give an option a shorter label, its own help, a step or a sidebar
group; an option it does not name is drawn with a label made from its name, the first sentence
of its docstring as help, in the "Software stack" group. A new software option therefore
appears in the app with no app code. No Streamlit here: ``appkit.sidebar`` draws the options.
"""

from __future__ import annotations

import functools

from perfmodel.spec.software import SoftwareStack

from .schema_form import Option, field_options, field_values, read_values
from .software_labels import DEFAULT_GROUP, LOOKS

DRAWN_APART = ("stack", "overlap")
"""Fields with widgets of their own: the preset selector and the per-kind overlap fractions."""


@functools.lru_cache(maxsize=32)
def options(model: type[SoftwareStack] = SoftwareStack) -> tuple[Option, ...]:
    """Every software option of ``model`` as a widget: those ``LOOKS`` names in its order, then
    the others in the schema's."""
    return field_options(model, LOOKS, DEFAULT_GROUP, skip=DRAWN_APART, path="software.")


def group_options(group: str, model: type[SoftwareStack] = SoftwareStack) -> tuple[Option, ...]:
    return tuple(o for o in options(model) if o.group == group)


def widget_values(sw: SoftwareStack, model: type[SoftwareStack] = SoftwareStack) -> dict:
    """Every option's widget value for ``sw``."""
    return read_values(sw, options(model))


def software_values(v: dict, model: type[SoftwareStack] = SoftwareStack) -> dict:
    """The options' part of the ``software:`` mapping from widget values (a missing widget gives
    its default), or InputError naming the field."""
    return field_values(v, options(model))
