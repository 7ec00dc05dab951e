"""Text from users, bounded before any work: a link's packed scenario (``?s=``), uploaded files
and edited YAML. Size, unpacked size, nesting, value count and numbers are checked here; the
callers (``appkit.state``, the pages) then parse the data into frozen models."""

from __future__ import annotations

import base64
import json
import math
import zlib

from perfmodel.spec.errors import InputError, json_object_unique_keys, parse_data_text
from perfmodel.spec.scenario import Scenario, parse_scenario
from perfmodel.spec.units import KIBI, MEBI

MAX_UPLOAD_MIB = 1
"""Uploaded files (scenario, hardware YAML, config.json), edited hardware YAML and a link's
unpacked scenario larger than this many MiB are refused. The server's own limit,
``server.maxUploadSize`` in ``app/.streamlit/config.toml`` (Streamlit's unit is the MiB), is
the same number: it refuses a bigger upload while it streams in, before it is in memory."""
MAX_UPLOAD_BYTES = MAX_UPLOAD_MIB * MEBI
MAX_QUERY_CHARS = 64 * KIBI
"""A link's scenario (``?s=``) longer than this is refused before it is decoded. The example
scenario takes ~500 characters, one with inline hardware and model ~6,000; 64 Ki characters
unpack to at most ~50 MB (deflate's ratio is at most ~1,032:1), and unpacking stops at
``MAX_UPLOAD_BYTES`` anyway."""
MAX_DATA_DEPTH = 64
"""Nesting deeper than this in a link or an uploaded file is refused (a scenario with inline
hardware and model nests 6 deep; a Hugging Face config.json ~4)."""
MAX_DATA_VALUES = 100_000
"""A link or file holding more values than this, counting each YAML alias as often as it is
used, is refused (the largest catalogue hardware spec holds ~400)."""
MAX_WIDGET_INT = 2**53 - 1
"""The largest whole number a browser's number field holds exactly (JavaScript's
``Number.MAX_SAFE_INTEGER``); the model's integer arithmetic is 64-bit."""
QUERY_KEY = "s"
"""URL query parameter that carries the scenario (zlib + URL-safe base64 of its JSON)."""


def encode_query(data: dict) -> str:
    raw = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(zlib.compress(raw, 9)).decode().rstrip("=")


def decode_query(text: str) -> Scenario:
    """The scenario of a link, or InputError("link", ...). Bounded before any work: the text's
    length, then the unpacked size (``inflate``), then nesting, value count and numbers
    (``check_data``); ``parse_scenario`` opens no file."""
    if len(text) > MAX_QUERY_CHARS:
        raise InputError("link", f"the scenario in the URL is {len(text):,} characters; the limit is "
                                 f"{MAX_QUERY_CHARS:,}")
    try:
        packed = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
    except ValueError:
        raise InputError("link", "the scenario in the URL is damaged (not URL-safe base64)") from None
    try:
        raw = inflate(packed, MAX_UPLOAD_BYTES, "link")
    except zlib.error:
        raise InputError("link", "the scenario in the URL is damaged (not zlib data)") from None
    try:
        data = json.loads(raw, object_pairs_hook=json_object_unique_keys)   # a repeated key: refused, as in files
    except RecursionError:
        raise InputError("link", f"the scenario in the URL nests deeper than {MAX_DATA_DEPTH} levels") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise InputError("link", "the scenario in the URL is damaged (not JSON)") from None
    except ValueError as exc:   # e.g. a whole number of more than 4,300 digits
        raise InputError("link", f"the scenario in the URL cannot be read ({str(exc).split(';')[0][:120]})") from None
    check_data(data, "link")
    return parse_scenario(data)


def inflate(packed: bytes, limit_bytes: int, field: str) -> bytes:
    """zlib data unpacked, or InputError as soon as it passes ``limit_bytes``: a few kilobytes
    can unpack to megabytes, so the output is bounded, not measured afterwards."""
    d = zlib.decompressobj()
    raw = d.decompress(packed, limit_bytes + 1)
    if len(raw) > limit_bytes:
        raise InputError(field, f"the scenario in the URL unpacks to more than {limit_bytes / MEBI:g} MiB")
    if not d.eof or d.unused_data:
        raise zlib.error("the stream is cut short or has trailing bytes")
    return raw


def check_data(data, field: str) -> None:
    """Refuse parsed data the app cannot show or the model cannot size, with InputError naming
    ``field`` and the place: nesting deeper than ``MAX_DATA_DEPTH``, more than ``MAX_DATA_VALUES``
    values (a YAML alias counts each time it is used, so an alias bomb stops here), whole
    numbers beyond ``MAX_WIDGET_INT``, numbers that are not finite. At most ``MAX_DATA_VALUES``
    steps, whatever the input."""
    stack = [(data, ())]
    seen = 0
    while stack:
        node, where = stack.pop()
        seen += 1
        if seen > MAX_DATA_VALUES:
            raise InputError(field, f"holds more than {MAX_DATA_VALUES:,} values")
        if len(where) > MAX_DATA_DEPTH:
            raise InputError(field, f"nests deeper than {MAX_DATA_DEPTH} levels")
        if isinstance(node, dict):
            stack.extend((v, (*where, str(k)[:40])) for k, v in node.items())
        elif isinstance(node, (list, tuple)):
            stack.extend((v, (*where, i)) for i, v in enumerate(node))
        elif isinstance(node, bool):
            continue
        elif isinstance(node, int) and abs(node) > MAX_WIDGET_INT:
            raise InputError(field, f"{_place(where)}: a {len(str(abs(node)))}-digit whole number; the app's number "
                                    f"fields hold at most {MAX_WIDGET_INT:,} (2^53 - 1)")
        elif isinstance(node, float) and not math.isfinite(node):
            raise InputError(field, f"{_place(where)}: {node} is not a finite number")


def _place(where: tuple) -> str:
    return ".".join(str(w) for w in where) or "the value"


def parse_text(text: str, field: str, json_text: bool = False):
    """YAML (or JSON) text from a user, parsed and bounded (size, then ``check_data``), or
    InputError naming ``field``."""
    size = len(text.encode())
    if size > MAX_UPLOAD_BYTES:
        raise InputError(field, f"the text is {size / KIBI:,.0f} KiB; the limit is {MAX_UPLOAD_MIB} MiB")
    try:
        data = parse_data_text(text, field, json_text=json_text)
    except InputError:
        raise
    except RecursionError:
        raise InputError(field, f"the text nests deeper than {MAX_DATA_DEPTH} levels") from None
    except ValueError as exc:   # e.g. a whole number of more than 4,300 digits
        raise InputError(field, f"the text cannot be read ({str(exc).splitlines()[0][:120]})") from None
    check_data(data, field)
    return data


def check_upload_size(name: str, size: int) -> None:
    if size > MAX_UPLOAD_BYTES:
        raise InputError(name, f"the file is {size / KIBI:,.0f} KiB; the limit is {MAX_UPLOAD_MIB} MiB")


def upload_text(raw: bytes, label: str) -> str:
    """An upload's bytes as text: at most MAX_UPLOAD_BYTES of UTF-8, else InputError naming ``label``."""
    check_upload_size(label, len(raw))
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(label, "the file is not UTF-8 text") from None
