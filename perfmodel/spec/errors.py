"""The one error type users see: a field name and a reason, on one line; and the readers of
user files, which turn anything they cannot take (missing, a directory, binary, too large,
nested too deep, duplicate keys, not YAML) into that error before they do any work."""

import re

from perfmodel.spec import limits

MAX_MESSAGE_PART_CHARS = 1000
"""A field or reason longer than this is cut where it is shown (the input is not changed)."""


def one_line(text) -> str:
    """``text`` with line breaks and other control characters written as escapes (``\\n``), cut
    to MAX_MESSAGE_PART_CHARS: whatever a user sends, an error message stays one line."""
    s = str(text)
    if not s.isprintable():
        s = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in s)
    return s if len(s) <= MAX_MESSAGE_PART_CHARS else s[:MAX_MESSAGE_PART_CHARS - 3] + "..."


class InputError(ValueError):
    """Invalid user input. ``str(err)`` is ``"<field>: <reason>"`` on one line."""

    def __init__(self, field: str, reason: str):
        self.field = one_line(field)
        self.reason = one_line(reason)
        super().__init__(f"{self.field}: {self.reason}")

    def __reduce__(self):
        """Pickled as its field and reason: a worker process's error reaches the caller as itself
        (``perfmodel size`` over several hardware types), not as a broken process pool."""
        return type(self), (self.field, self.reason)


_TYPE_MISMATCH = {"string_type", "int_type", "float_type", "bool_type", "dict_type", "list_type",
                  "model_type", "model_attributes_type", "is_instance_of"}


_SCHEMA_TAG = re.compile(r"[a-z]+(?:-[a-z]+)+(?:\[.*\])?")
"""pydantic's name of a union member built from a constrained type (``constrained-str``,
``function-after[_check(), ModelSpec]``)."""


def _is_union_tag(part) -> bool:
    """A location part naming a union member (``str``, ``constrained-str``,
    ``function-after[_check(), ModelSpec]``), not a field: our field names are lower snake_case."""
    if not isinstance(part, str) or part.isdigit():
        return False                       # a list index or a numeric mapping key
    snake_case = part.replace("_", "").islower()
    return (part in {"str", "int", "float", "bool", "dict", "list"} or not snake_case or "[" in part
            or bool(_SCHEMA_TAG.fullmatch(part)))


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
        path = tuple(err.get("loc", ()))
        key = path[-1:] if err.get("type") == "extra_forbidden" else ()   # the user's key, shown as given
        path = path[:-1] if key else path
        loc = ".".join([str(p) for p in path if p != "__root__" and not _is_union_tag(p)] + [str(k) for k in key])
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


def _node_depth(root) -> int:
    """Nesting depth of a composed YAML node graph, each node visited once (aliases make it a
    graph: a billion-laughs file is a few hundred nodes); a node that contains itself is
    infinitely deep."""
    import yaml

    depth: dict[int, int] = {}
    stack = [(root, False)]
    on_path: set[int] = set()
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            kids = _children(node)
            depth[key] = 1 + max((depth[id(k)] for k in kids), default=0)
            if depth[key] > limits.MAX_NESTING_DEPTH:
                return depth[key]
            continue
        if key in depth:
            continue
        if key in on_path:
            return limits.MAX_NESTING_DEPTH + 1          # a recursive alias (&a [*a])
        if not isinstance(node, yaml.CollectionNode):
            depth[key] = 0
            continue
        on_path.add(key)
        stack.append((node, True))
        stack.extend((k, False) for k in _children(node) if id(k) not in depth)
    return depth.get(id(root), 0)


def _children(node) -> list:
    import yaml

    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _strict_loader():
    """A safe loader (libyaml's C parser where PyYAML was built with it, several times faster on
    the model and hardware catalogues) that refuses duplicate keys and deep nesting."""
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    merge_tag = "tag:yaml.org,2002:merge"

    class StrictSafeLoader(base):
        def construct_document(self, node):
            if _node_depth(node) > limits.MAX_NESTING_DEPTH:
                raise yaml.YAMLError(f"nested more than {limits.MAX_NESTING_DEPTH} levels deep")
            return super().construct_document(node)

        def construct_mapping(self, node, deep=False):
            if isinstance(node, yaml.MappingNode):
                seen = set()
                for key_node, _ in node.value:
                    if key_node.tag == merge_tag:
                        continue           # '<<' merges may be overridden by explicit keys
                    key = self.construct_object(key_node, deep=True)
                    try:
                        duplicate = key in seen
                        seen.add(key)
                    except TypeError:      # an unhashable key: SafeConstructor refuses it
                        continue
                    if duplicate:
                        raise yaml.constructor.ConstructorError(
                            "while constructing a mapping", node.start_mark,
                            f"found duplicate key {key!r}", key_node.start_mark)
            return super().construct_mapping(node, deep)

    # YAML 1.1 reads 1e12 and 1.5e13 (no dot, or no exponent sign) as strings; YAML 1.2 and
    # every user read them as numbers, and strict fields refuse strings, so resolve them as floats.
    StrictSafeLoader.add_implicit_resolver("tag:yaml.org,2002:float", YAML12_EXPONENT_FLOAT, list("-+0123456789."))
    return StrictSafeLoader


YAML12_EXPONENT_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$")
"""A float with an exponent, as YAML 1.2 writes it (``1e12``, ``1.5e13``, ``2E-3``)."""


def dump_yaml(data) -> str:
    """``yaml.safe_dump`` (keys in order) with the reader's resolvers: a string ``safe_load_yaml``
    would read as a number (a scenario named ``1e3``) is written quoted, so it reads back as text."""
    import yaml

    class Dumper(yaml.SafeDumper):
        pass

    Dumper.add_implicit_resolver("tag:yaml.org,2002:float", YAML12_EXPONENT_FLOAT, list("-+0123456789."))
    return yaml.dump(data, Dumper=Dumper, sort_keys=False)
_LOADER = None


def safe_load_yaml(text: str):
    """Safe YAML loading that refuses duplicate keys and nesting deeper than
    ``limits.MAX_NESTING_DEPTH``; raises ``yaml.YAMLError``."""
    import yaml

    global _LOADER
    if _LOADER is None:
        _LOADER = _strict_loader()
    return yaml.load(text, Loader=_LOADER)


def _json_depth(text: str) -> int:
    """Deepest nesting of brackets in JSON text, strings left out (counted before parsing, so
    a 100,000-deep document is refused without recursion)."""
    import numpy as np

    skeleton = re.sub(r'"(?:[^"\\]|\\.)*"', "", text).encode("utf-8", "replace")
    b = np.frombuffer(skeleton, dtype=np.uint8)
    step = np.isin(b, (ord("["), ord("{"))).astype(np.int64) - np.isin(b, (ord("]"), ord("}")))
    return int(np.cumsum(step).max(initial=0))


def _json_object(pairs):
    """A JSON object that refuses duplicate keys (json.loads keeps the last silently)."""
    out = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


json_object_unique_keys = _json_object
"""``object_pairs_hook`` for ``json.loads``: a repeated key is a ValueError."""


def _json_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def _json_float(text: str) -> float:
    import math

    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is too large for a number")
    return value


def load_json(text: str):
    """``json.loads`` that refuses duplicate keys, NaN and Infinity, and nesting deeper than
    ``limits.MAX_NESTING_DEPTH``; raises ValueError."""
    import json

    if _json_depth(text) > limits.MAX_NESTING_DEPTH:
        raise ValueError(f"nested more than {limits.MAX_NESTING_DEPTH} levels deep")
    return json.loads(text, object_pairs_hook=_json_object, parse_constant=_json_constant,
                      parse_float=_json_float)


def parse_data_text(text: str, field: str, json_text: bool = False, name: str = "the text"):
    """Parsed YAML (or JSON) text, or a one-line InputError naming ``field``."""
    import yaml

    kind = "JSON" if json_text else "YAML"
    if len(text) > limits.MAX_DATA_FILE_BYTES:
        raise InputError(field, f"{name} is too large ({len(text):,} characters; at most "
                                f"{limits.MAX_DATA_FILE_BYTES:,})")
    try:
        return load_json(text) if json_text else safe_load_yaml(text)
    except (yaml.YAMLError, ValueError, RecursionError) as exc:
        # ValueError: JSON syntax, and integers of more than 4,300 digits in either format
        raise InputError(field, f"{name} is not valid {kind} ({_parse_problem(exc)})") from None


def _parse_problem(exc) -> str:
    """What a YAML or JSON parser found wrong, and where (one line)."""
    import yaml

    if "integer string conversion" in str(exc):
        return "an integer has more than 4,300 digits"
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        return f"{exc.problem}{where}"
    return (str(exc).splitlines() or [type(exc).__name__])[0]


def read_text_file(path, field: str, max_bytes: int = limits.MAX_DATA_FILE_BYTES) -> str:
    """The UTF-8 text of a file a user names, or a one-line InputError naming ``field``: a
    missing, unreadable, empty or binary file, a directory, or one larger than ``max_bytes``
    (checked with stat, then by reading at most ``max_bytes + 1`` bytes, so a device or a pipe
    that never ends is refused too)."""
    import os
    import stat
    from pathlib import Path

    p = Path(path)
    name = p.name or str(p)
    too_large = f"{name} is too large (more than {max_bytes:,} bytes)"
    try:
        st = os.stat(p)
        if stat.S_ISDIR(st.st_mode):
            raise InputError(field, f"{p} is a directory, not a file")
        if stat.S_ISREG(st.st_mode) and st.st_size > max_bytes:
            raise InputError(field, f"{name} is too large ({st.st_size:,} bytes; at most {max_bytes:,})")
        with open(p, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except InputError:
        raise
    except FileNotFoundError:
        raise InputError(field, f"file not found: {p}") from None
    except OSError as exc:
        raise InputError(field, f"cannot read {name} ({exc.strerror or type(exc).__name__})") from None
    except ValueError:   # os.stat refuses a path with a NUL byte
        raise InputError(field, f"{name!r} is not a file name (it holds a NUL byte)") from None
    if len(data) > max_bytes:
        raise InputError(field, too_large)
    if b"\x00" in data:
        raise InputError(field, f"{name} is a binary file, not text")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(field, f"{name} is not UTF-8 text (byte {exc.start}); a binary file?") from None
    if not text.strip():
        raise InputError(field, f"{name} is empty")
    return text


def read_data_file(path, field: str):
    """Parsed YAML (or JSON, by suffix) of a file, or a one-line InputError naming ``field``."""
    from pathlib import Path

    p = Path(path)
    text = read_text_file(p, field)
    return parse_data_text(text, field, json_text=p.suffix == ".json", name=p.name)


def check_output_path(path, field: str, inputs=()) -> None:
    """Refuse, with a one-line InputError, an output path that is a directory or one of the
    command's own input files (writing would destroy what it reads)."""
    import os
    from pathlib import Path

    p = Path(path)
    if p.is_dir():
        raise InputError(field, f"{p} is a directory; give a file name")
    if _in_installed_package(p):
        raise InputError(field, f"{p} is inside the installed perfmodel package; write it elsewhere")
    for source in inputs:
        try:
            same = p.exists() and os.path.samefile(p, source)
        except OSError:
            same = False
        if same:
            raise InputError(field, f"{p} is also an input of this command; writing it would overwrite "
                                    "what it reads")


def _in_installed_package(p) -> bool:
    """Whether ``p`` lies in the perfmodel package of an installation (site-packages). A source
    checkout (``pyproject.toml`` beside the package) may refit its own data when a path names it."""
    from perfmodel.spec.paths import PACKAGE_DIR, PROJECT_DIR

    return not (PROJECT_DIR / "pyproject.toml").is_file() and p.resolve().is_relative_to(PACKAGE_DIR)


def write_text_file(path, text: str, field: str, inputs=()):
    """Write ``text`` to ``path`` (creating its folder), or raise a one-line InputError naming
    ``field``: a directory, an input of the command, an unwritable place or a full device."""
    from pathlib import Path

    p = Path(path)
    check_output_path(p, field, inputs)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        with open(p, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
    except OSError as exc:
        raise InputError(field, f"cannot write {p} ({exc.strerror or type(exc).__name__})") from None
    return p
