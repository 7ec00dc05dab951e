"""The one error type users see: a field name and a reason, on one line."""


class InputError(ValueError):
    """Invalid user input. ``str(err)`` is ``"<field>: <reason>"`` on one line."""

    def __init__(self, field: str, reason: str):
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}")


_TYPE_MISMATCH = {"string_type", "int_type", "float_type", "bool_type", "dict_type", "list_type",
                  "model_type", "model_attributes_type", "is_instance_of"}


def _is_union_tag(part) -> bool:
    """A location part naming a union member (``str``, ``function-after[_check(), ModelSpec]``),
    not a field: our field names are lower snake_case."""
    if not isinstance(part, str) or part.isdigit():
        return False                       # a list index or a numeric mapping key
    snake_case = part.replace("_", "").islower()
    return part in {"str", "int", "float", "bool", "dict", "list"} or not snake_case or "[" in part


def _without_unmatched_union_members(errors: list) -> list:
    """For a field typed ``A | B``, pydantic reports each member's failure. Where one member
    failed only because the value is of another type (a mapping given where a preset name
    could go), that report says nothing: keep the others."""
    tagged = [e for e in errors if any(_is_union_tag(p) for p in e.get("loc", ()))]
    informative = [e for e in tagged if e.get("type") not in _TYPE_MISMATCH]
    if not informative:
        return errors
    return [e for e in errors if e not in tagged or e in informative]


def pydantic_message(exc, prefix: str = "") -> str:
    """Turn a pydantic ValidationError into one line naming the first bad field."""
    errors = _without_unmatched_union_members(exc.errors())
    parts = []
    for err in errors[:3]:
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "__root__" and not _is_union_tag(p))
        field = f"{prefix}{loc}" if loc else (prefix.rstrip(".") or "input")
        msg = err.get("msg", "invalid")
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, "):]
        if not loc and not prefix:
            parts.append(msg)
            continue
        if err.get("type") == "extra_forbidden":
            msg = "unknown field (check the spelling)"
        parts.append(f"{field}: {msg}")
    more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
    return "; ".join(parts) + more


def validated(model_cls, data, field: str, must: str = "must be a YAML mapping"):
    """``model_cls.model_validate(data)``, or a one-line InputError naming ``field``."""
    from pydantic import ValidationError

    if not isinstance(data, dict):
        raise InputError(field, must)
    try:
        return model_cls.model_validate(data)
    except ValidationError as exc:
        raise InputError(field, pydantic_message(exc)) from None


def safe_load_yaml(text: str):
    """yaml.safe_load through libyaml's C parser where PyYAML was built with it (the same safe
    constructor, several times faster on the model and hardware catalogues)."""
    import yaml

    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def parse_data_text(text: str, field: str, json_text: bool = False, name: str = "the text"):
    """Parsed YAML (or JSON) text, or a one-line InputError naming ``field``."""
    import json

    import yaml

    try:
        return json.loads(text) if json_text else safe_load_yaml(text)
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        kind = "JSON" if json_text else "YAML"
        raise InputError(field, f"{name} is not valid {kind} ({str(exc).splitlines()[0]})") from None


def read_data_file(path, field: str):
    """Parsed YAML (or JSON, by suffix) of a file, or a one-line InputError naming ``field``."""
    from pathlib import Path

    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise InputError(field, f"file not found: {p}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(field, f"cannot read {p.name} ({exc})") from None
    return parse_data_text(text, field, json_text=p.suffix == ".json", name=p.name)
