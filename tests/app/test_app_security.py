"""The app against an attacker and a careless user (issue 31).

A share link (``?s=``), an upload or a typed value must never make the app read a file, write
one, call out over the network or work without bound; each bad input shows one line with
``st.error``, never a traceback. Two guards watch:

- In this process, an audit hook (``sys.addaudithook``) refuses and records, while a test runs
  the app with AppTest, any opening of the files a crafted link names and any network call
  that leaves this machine.
- ``test_server_*`` start the real server (``perfmodel app``, ``streamlit run``) with a
  ``sitecustomize`` guard on its PYTHONPATH that does the same in the server process, and
  check which addresses it listens on.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
import zlib
from pathlib import Path

import pytest
import yaml

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "app" / "streamlit_app.py"
EXAMPLE = ROOT / "perfmodel" / "data" / "example_scenario.yaml"
TIMEOUT_S = 120
CRAFTED_FILES = ("/proc/self/environ", "/dev/zero", "/etc/passwd", "/etc/hosts")
"""Files a crafted link or upload names; opening any of them while the app runs fails a test."""


# ------------------------------------------------------------------ in-process guard
def _loopback(host) -> bool:
    import ipaddress
    if host is None:
        return True
    if isinstance(host, bytes):
        host = host.decode(errors="replace")
    if not isinstance(host, str):
        return True
    host = host.strip("[]").split("%")[0].lower()
    if host in ("localhost", "ip6-localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Guard:
    """What the app did that it must not, while ``active``."""

    def __init__(self):
        self.active = False
        self.watched: set[str] = set(CRAFTED_FILES)
        self.log: list[str] = []

    def hook(self, event: str, args) -> None:
        if not self.active:
            return
        if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
            path = os.path.normpath(os.path.join(os.getcwd(), os.fsdecode(args[0])))
            if path in self.watched:
                self.log.append(f"open {path}")
                raise PermissionError(f"test guard: the app opened {path}")
        elif event in ("socket.connect", "socket.sendto", "socket.sendmsg") and isinstance(args[1], tuple):
            if args[0].family in (socket.AF_INET, socket.AF_INET6) and not _loopback(args[1][0]):
                self.log.append(f"{event} {args[1]}")
                raise PermissionError(f"test guard: {event} {args[1]}")
        elif event in ("socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr"):
            if not _loopback(args[0]):
                self.log.append(f"{event} {args[0]}")
                raise PermissionError(f"test guard: {event} {args[0]}")


_GUARD = _Guard()
sys.addaudithook(_GUARD.hook)   # hooks cannot be removed; it does nothing while inactive


@pytest.fixture
def guard():
    """The guard, active for the test; the test asserts ``guard.log == []`` where it matters."""
    _GUARD.log.clear()
    _GUARD.active = True
    try:
        yield _GUARD
    finally:
        _GUARD.active = False
        _GUARD.watched = set(CRAFTED_FILES)


# ----------------------------------------------------------------------- helpers
def _example() -> dict:
    """The example scenario as plain data, read the way perfmodel reads it."""
    from perfmodel.spec.scenario import load_scenario, scenario_to_dict
    return json.loads(json.dumps(scenario_to_dict(load_scenario(EXAMPLE))))


def _pack(raw: bytes) -> str:
    """A link's ``s=`` value as the app writes it: zlib, then URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(zlib.compress(raw, 9)).decode().rstrip("=")


def _link(data) -> str:
    return _pack(json.dumps(data).encode())


def _state():
    if str(APP.parent) not in sys.path:
        sys.path.insert(0, str(APP.parent))
    from appkit import state
    return state


def _shown(markdown: str) -> str:
    """Text as the page shows it (the app escapes Markdown in names and messages)."""
    import re
    return re.sub(r"\\(.)", r"\1", markdown)


def _errors(at: AppTest) -> list[str]:
    return [_shown(e.value) for e in at.error]


def _group(at: AppTest, group: str) -> AppTest:
    """Show one of the sidebar's groups (only the chosen one is drawn)."""
    return at.selectbox(key="_sidebar_group").set_value(group).run()


def _open_link(value: str) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT_S)
    at.query_params["s"] = value
    return at.run()


NESTED = r"nest(s|ed) (deeper|more) than"
"""The app's own bound (``state.check_data``) or the core parser's, whichever sees it first."""
DIGITS = r"4,?300 digits"
NAN = r"(?i)nan is not a"


def _assert_refused(at: AppTest, *patterns: str) -> None:
    """One line with st.error naming the problem (each pattern found by ``re.search``); no
    exception, no traceback, no internal error."""
    import re
    assert not at.exception, [e.value for e in at.exception]
    errors = _errors(at)
    assert errors, "expected st.error"
    assert all("\n" not in e and "Traceback" not in e and "internal error" not in e for e in errors), errors
    for pattern in patterns:
        assert any(re.search(pattern, e) for e in errors), (pattern, errors)


def _files(*roots: Path) -> set[str]:
    return {str(p) for r in roots for p in r.rglob("*") if "__pycache__" not in p.parts}


# ----------------------------------------------------------------- crafted links
def _with(**over) -> dict:
    return {**_example(), **over}


def _nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


LINKS = {
    # a file or address where a catalogue id belongs: refused, never opened or fetched
    "hardware-proc-environ": (lambda: _link(_with(hardware="/proc/self/environ")), "unknown hardware"),
    "hardware-dev-zero": (lambda: _link(_with(hardware="/dev/zero")), "unknown hardware"),
    "hardware-relative-path": (lambda: _link(_with(hardware="../../etc/passwd")), "unknown hardware"),
    "hardware-url": (lambda: _link(_with(hardware="http://169.254.169.254/latest/meta-data/")), "unknown hardware"),
    "hardware-yaml-path": (lambda: _link(_with(hardware="/etc/hosts.yaml")), "unknown hardware"),
    "model-path": (lambda: _link(_with(model="/etc/passwd")), "unknown model preset"),
    "model-json-path": (lambda: _link(_with(model="../../../etc/hosts.json")), "unknown model preset"),
    # damaged or hostile encodings
    "not-base64": (lambda: "%%%not*base64%%%", "not URL-safe base64"),
    "not-zlib": (lambda: base64.urlsafe_b64encode(b"plain bytes, not zlib").decode(), "not zlib data"),
    "cut-short": (lambda: _link(_example())[:200], "not zlib data"),
    "not-json": (lambda: _pack(b"{'hardware': 'h100-sxm'"), "not JSON"),
    "too-long": (lambda: "A" * (_state().MAX_QUERY_CHARS + 4), "characters; the limit is"),
    "json-nested-100000-deep": (lambda: _pack(_nested(100_000)), NESTED),
    "json-nested-200-deep": (lambda: _pack(b'{"name": ' + _nested(200) + b"}"), NESTED),
    "too-many-values": (lambda: _pack(json.dumps(_with(name=[0] * 200_000)).encode()), "more than 100,000 values"),
    "int-2-63": (lambda: _link(_with(num_gpus=2**63)), "num_gpus: a 19-digit whole number"),
    "int-2-64": (lambda: _link(_with(global_batch_size=2**64 + 1)), "global_batch_size: a 20-digit whole number"),
    "int-5000-digits": (lambda: _pack(json.dumps(_with(num_gpus=123456789)).replace("123456789", "9" * 5000).encode()),
                        DIGITS),
    "nan": (lambda: _link(_with(training_tokens=float("nan"))), "training_tokens: nan is not a finite number"),
    "infinity": (lambda: _link(_with(seq_length=float("inf"))), "seq_length: inf is not a finite number"),
    "not-a-mapping": (lambda: _link(["h100-sxm", 8]), "must be a YAML mapping"),
}


@pytest.mark.parametrize("name", LINKS)
def test_crafted_link_is_refused_in_one_line(name, guard):
    make, fragment = LINKS[name]
    t0 = time.monotonic()
    at = _open_link(make())
    assert time.monotonic() - t0 < 30
    _assert_refused(at, "The scenario in the link was not loaded", fragment)
    assert guard.log == []                                  # no file opened, no address looked up
    assert at.number_input(key="num_gpus").value == _example()["num_gpus"]   # the example is shown
    assert any(_shown(t.value).startswith("Plan:") for t in at.title)        # and the page works


@pytest.mark.parametrize("where", ["scenario", "model", "hardware"])
def test_link_with_a_300_character_name_is_refused(where, guard):
    from perfmodel.spec.hardware import load_hardware
    from perfmodel.spec.presets import load_model
    long = "n" * 300
    if where == "scenario":
        data = _with(name=long)
    elif where == "model":
        data = _with(model={**load_model("llama3-70b").model_dump(mode="json", exclude_none=True), "name": long})
    else:
        data = _with(hardware={**load_hardware("h100-sxm").model_dump(mode="json", exclude_none=True), "name": long})
    at = _open_link(_link(data))
    _assert_refused(at, "name")
    assert guard.log == []


def test_zlib_bomb_is_refused_without_unpacking_it():
    """A link under the length limit that unpacks to ~40 MiB: unpacking stops at the limit
    (``zlib.decompressobj().decompress(data, max_length)``), so memory stays near it."""
    import tracemalloc

    from perfmodel.spec.errors import InputError
    state = _state()
    bomb = _pack(b'{"name": "' + b" " * (40 * 2**20) + b'"}')
    assert len(bomb) < state.MAX_QUERY_CHARS
    tracemalloc.start()
    try:
        with pytest.raises(InputError, match="unpacks to more than 1 MiB"):
            state.decode_query(bomb)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * state.MAX_UPLOAD_BYTES, peak
    _assert_refused(_open_link(bomb), "unpacks to more than 1 MiB")


def test_query_length_is_checked_before_decoding(monkeypatch):
    state = _state()
    from appkit import untrusted

    from perfmodel.spec.errors import InputError

    def no(*a, **k):
        raise AssertionError("decoded a link over the length limit")
    monkeypatch.setattr(untrusted.base64, "b64decode", no)
    with pytest.raises(InputError, match="the limit is 65,536"):
        state.decode_query("A" * (state.MAX_QUERY_CHARS + 1))


def test_link_with_inline_hardware_loads_without_a_file(guard):
    """The fix end to end: an inline hardware spec (what an edited or uploaded one becomes)
    travels in the link and loads into the YAML editor; nothing is read from a path."""
    from perfmodel.spec.hardware import load_hardware
    hw = load_hardware("h100-sxm").model_dump(mode="json", exclude_none=True)
    hw.update(id="../../x", name="edited H100")
    at = _group(_open_link(_link(_with(hardware=hw))), "Hardware")
    assert not at.exception and not _errors(at), _errors(at)
    assert at.sidebar.radio(key="hw_source").value == "Edit YAML"
    assert yaml.safe_load(at.text_area(key="hw_yaml_text").value)["id"] == "../../x"
    assert "64 x ../../x" in _shown(at.title[0].value)
    assert guard.log == []


# -------------------------------------------------------------- crafted uploads
def _upload(key: str, name: str, data: bytes) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT_S).run()
    if key == "hw_upload":
        _group(at, "Hardware").sidebar.radio(key="hw_source").set_value("Upload YAML").run()
    elif key == "model_upload":
        _group(at, "Model").sidebar.radio(key="model_source").set_value("Uploaded").run()
    else:
        _group(at, "Scenario file and link")
    return at.file_uploader(key=key).upload(name, data, "application/octet-stream").run()


def _alias_bomb() -> bytes:
    """Nine levels of ten aliases each: 10^9 values once expanded, 100 nodes as parsed."""
    lines = ["a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    return ("\n".join(lines) + "\nhardware: h100-sxm\nnum_gpus: 8\nname: *a8\n").encode()


def _example_with(extra: str) -> bytes:
    return (EXAMPLE.read_text() + "\n" + extra + "\n").encode()


SCENARIO_UPLOADS = {
    "binary": (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe" * 50, "not UTF-8 text"),
    "empty": (b"", "must be a YAML mapping"),
    "oversized": (b"# " + b"x" * (2**20), "the limit is 1 MiB"),
    "not-yaml": (b"name: [unclosed\n", "not valid YAML"),
    "nested-flow-100000-deep": (_nested(100_000), "scenario YAML"),
    "nested-200-deep": (b"name: " + _nested(200) + b"\n", NESTED),
    "alias-bomb": (_alias_bomb(), "more than 100,000 values"),
    "int-5000-digits": (b"hardware: h100-sxm\nnum_gpus: " + b"9" * 5000 + b"\n", DIGITS),
    "int-2-63": (b"hardware: h100-sxm\nnum_gpus: 9223372036854775808\n", "num_gpus: a 19-digit whole number"),
    "nan": (b"hardware: h100-sxm\nnum_gpus: 8\nseq_length: .nan\n", "seq_length: nan is not a finite number"),
    "hardware-proc-environ": (yaml.safe_dump(_with(hardware="/proc/self/environ")).encode(), "unknown hardware"),
    "hardware-dev-zero": (yaml.safe_dump(_with(hardware="/dev/zero")).encode(), "unknown hardware"),
    "model-path": (yaml.safe_dump(_with(model="/etc/passwd")).encode(), "unknown model preset"),
}


@pytest.mark.parametrize("name", SCENARIO_UPLOADS)
def test_crafted_scenario_upload_is_refused_in_one_line(name, guard):
    data, fragment = SCENARIO_UPLOADS[name]
    t0 = time.monotonic()
    at = _upload("scenario_upload", "s.yaml", data)
    assert time.monotonic() - t0 < 30
    _assert_refused(at, fragment)
    assert guard.log == []
    assert at.number_input(key="num_gpus").value == _example()["num_gpus"]   # the sidebar is unchanged


def test_scenario_upload_naming_a_hardware_file_never_reads_it(tmp_path, guard):
    """A path in an uploaded scenario is not a file the person running the app named: it is
    refused, and the file is not opened (``load_scenario``'s inlining is for the CLI only)."""
    hw_file = tmp_path / "mine.yaml"
    hw_file.write_text((ROOT / "hardware" / "h100-sxm.yaml").read_text())
    guard.watched.add(str(hw_file))
    data = _example()
    data["hardware"] = str(hw_file)
    at = _upload("scenario_upload", "s.yaml", yaml.safe_dump(data).encode())
    _assert_refused(at, "unknown hardware")
    assert guard.log == []


@pytest.mark.parametrize("key, name, data", [
    ("scenario_upload", "s.yaml", _example_with("num_gpus: 128")),
    ("hw_upload", "hw.yaml", ((ROOT / "hardware" / "h100-sxm.yaml").read_text() + "\nid: other\n").encode()),
])
def test_yaml_upload_with_duplicate_keys_is_refused(key, name, data):
    _assert_refused(_upload(key, name, data), "duplicate")


def test_config_json_with_duplicate_keys_is_refused():
    cfg = (ROOT / "tests" / "data" / "hf" / "llama3-8b.json").read_bytes().rstrip().rstrip(b"}")
    _assert_refused(_upload("model_upload", "config.json", cfg + b', "num_hidden_layers": 2}'), "duplicate")


HARDWARE_UPLOADS = {
    "binary": (b"\x00\x01\x02\xff", "not UTF-8 text"),
    "control-characters": (b"id: x\x00\n", "not valid YAML"),
    "empty": (b"", "must be a YAML mapping"),
    "oversized": (b"# " + b"x" * (2**20), "the limit is 1 MiB"),
    "alias-bomb": (_alias_bomb(), "more than 100,000 values"),
}


@pytest.mark.parametrize("name", HARDWARE_UPLOADS)
def test_crafted_hardware_upload_is_refused_in_one_line(name, guard):
    data, fragment = HARDWARE_UPLOADS[name]
    _assert_refused(_upload("hw_upload", "hw.yaml", data), fragment)
    assert guard.log == []


CONFIG_UPLOADS = {
    "binary": (b"\x00\x01\x02\xff", "not UTF-8 text"),
    "empty": (b"", "not valid JSON"),
    "oversized": (b" " * (2**20 + 1), "the limit is 1 MiB"),
    "nested-100000-deep": (_nested(100_000), NESTED),
    "nan": (b'{"num_hidden_layers": NaN}', NAN),
    "int-5000-digits": (b'{"num_hidden_layers": ' + b"9" * 5000 + b"}", DIGITS),
    "not-an-object": (b"[1, 2]", "must be a JSON object"),
}


@pytest.mark.parametrize("name", CONFIG_UPLOADS)
def test_crafted_config_json_upload_is_refused_in_one_line(name, guard):
    data, fragment = CONFIG_UPLOADS[name]
    _assert_refused(_upload("model_upload", "config.json", data), fragment)
    assert guard.log == []


CALIBRATION_UPLOADS = {
    "binary": ("log.txt", b"\x00\x01\x02\xff", "not UTF-8 text"),
    "oversized": ("log.txt", b"# " + b"x" * (2**20), "the limit is 1 MiB"),
    "not-a-log": ("notes.txt", b"hello\n", "neither a result file"),
    "alias-bomb": ("r.yaml", _alias_bomb(), "more than 100,000 values"),
    "results-naming-a-file": ("r.yaml", yaml.safe_dump({
        "metadata": {"device": "x", "backend": "numpy", "date": "2025-01-01", "source": "/etc/passwd"},
        "records": "/etc/passwd"}).encode(), "records"),
    "log-named-like-a-path": ("../../../etc/hosts.log", b"# nothing here\n", "neither a result file"),
}


@pytest.mark.parametrize("name", CALIBRATION_UPLOADS)
def test_crafted_calibration_upload_is_refused_in_one_line(name, guard):
    """The calibration page's upload: its name is a label, never a path, and its text is bounded
    before it is parsed or fitted."""
    file_name, data, fragment = CALIBRATION_UPLOADS[name]
    guard.watched.update({"/etc/hosts.log", str((Path.cwd() / file_name).resolve())})
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT_S).run()
    at.switch_page("pages_/calibration.py").run()
    at.radio(key="cal_section").set_value("Fit your own measurements").run()
    at.file_uploader(key="cal_upload").upload(file_name, data, "application/octet-stream").run()
    _assert_refused(at, fragment)
    assert guard.log == []


def test_a_log_with_more_sizes_than_a_curve_holds_is_not_fitted_for_minutes(guard):
    """2,400 message sizes (4,800 records, under the app's 5,000; a 1 MiB log holds about 9,000
    rows): the curve is refused by the regime fit's bound (64 sizes) and the page says so, in
    seconds, where the search over cuts would have run for hours."""
    import sys
    sys.path.insert(0, str(ROOT / "tests"))
    from support.nccl_logs import synthetic_log
    log = synthetic_log("all_reduce", 8, 1, 20e-6, 300e9, sizes=range(2**20, 2**20 + 2400 * 64, 64)).encode()
    assert len(log) < 2**20
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT_S).run()
    at.switch_page("pages_/calibration.py").run()
    at.radio(key="cal_section").set_value("Fit your own measurements").run()
    t0 = time.monotonic()
    at.file_uploader(key="cal_upload").upload("all_reduce_perf.txt", log, "text/plain").run()
    assert time.monotonic() - t0 < 60
    assert not at.exception
    assert any("more than 64 distinct message sizes" in w.value.replace("\\", "") for w in at.warning)
    assert guard.log == []


def test_uploaders_state_the_limit_the_server_enforces():
    """app/.streamlit/config.toml's server.maxUploadSize (MiB, Streamlit's unit) is the app's
    MAX_UPLOAD_MIB; each uploader says it and asks the browser for the same."""
    import tomllib
    state = _state()
    cfg = tomllib.loads((APP.parent / ".streamlit" / "config.toml").read_text())
    assert cfg["server"]["maxUploadSize"] == state.MAX_UPLOAD_MIB
    assert state.MAX_UPLOAD_BYTES == state.MAX_UPLOAD_MIB * 2**20
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT_S).run()
    seen = {}
    for group, radio, value in (("Hardware", "hw_source", "Upload YAML"), ("Model", "model_source", "Uploaded"),
                                ("Scenario file and link", None, None)):
        _group(at, group)
        if radio:
            at.sidebar.radio(key=radio).set_value(value).run()
        for f in at.get("file_uploader"):
            seen[f.proto.label] = f.proto.max_upload_size_mb
    assert len(seen) == 3, seen
    for label, mib in seen.items():
        assert f"up to {state.MAX_UPLOAD_MIB} MiB" in label and mib == state.MAX_UPLOAD_MIB, (label, mib)


# ------------------------------------------------------------ nothing is written
@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """A temp dir and a working dir two levels down, so ``../../x`` from either lands in tmp_path."""
    import tempfile
    tmp = tmp_path / "a" / "b" / "tmp"
    cwd = tmp_path / "a" / "b" / "cwd"
    tmp.mkdir(parents=True)
    cwd.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.chdir(cwd)
    return tmp_path


@pytest.fixture
def downloads(monkeypatch):
    """The bytes of every st.download_button, by file name."""
    from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage
    seen: dict[str, bytes] = {}
    original = MemoryMediaFileStorage.load_and_get_id

    def record(self, path_or_data, mimetype, kind, filename=None):
        if filename and isinstance(path_or_data, (bytes, str)):
            seen[filename] = path_or_data if isinstance(path_or_data, bytes) else path_or_data.encode()
        return original(self, path_or_data, mimetype, kind, filename)
    monkeypatch.setattr(MemoryMediaFileStorage, "load_and_get_id", record)
    return seen


@pytest.mark.parametrize("how", ["edited", "uploaded"])
def test_hardware_yaml_with_a_path_as_id_writes_nothing(how, sandbox, downloads, guard):
    """``id: ../../x`` in edited or uploaded hardware YAML: no file appears anywhere (the temp
    dir, the working dir, the app's and the catalogue's folders); the spec stays in the
    session, and the share link and the downloaded YAML carry it inline, not as a path."""
    watched = (sandbox, ROOT / "app", ROOT / "hardware")
    before = _files(*watched)
    text = (ROOT / "hardware" / "h100-sxm.yaml").read_text().replace("id: h100-sxm", "id: ../../x", 1)
    assert "id: ../../x" in text
    at = _group(AppTest.from_file(str(APP), default_timeout=TIMEOUT_S).run(), "Hardware")
    if how == "edited":
        at.sidebar.radio(key="hw_source").set_value("Edit YAML").run()
        at.text_area(key="hw_yaml_text").input(text).run()
    else:
        at.sidebar.radio(key="hw_source").set_value("Upload YAML").run()
        at.file_uploader(key="hw_upload").upload("x.yaml", text.encode(), "application/x-yaml").run()
    assert not at.exception and not _errors(at), _errors(at)
    assert "64 x ../../x" in _shown(at.title[0].value)
    _group(at, "Scenario file and link")        # where the download is
    assert "64 x ../../x" in _shown(at.title[0].value)
    assert _files(*watched) == before
    assert guard.log == []

    link = at.query_params["s"]
    link = link[0] if isinstance(link, list) else link
    shared = json.loads(zlib.decompress(base64.urlsafe_b64decode(link + "=" * (-len(link) % 4))))
    assert isinstance(shared["hardware"], dict) and shared["hardware"]["id"] == "../../x"
    download = yaml.safe_load(next(v for k, v in downloads.items() if k.endswith(".yaml")))
    assert isinstance(download["hardware"], dict) and download["hardware"]["id"] == "../../x"


def test_download_file_name_is_a_plain_name():
    state = _state()
    assert state.download_name("../../etc/cron.d/x") == "etc_cron_d_x.yaml"
    assert state.download_name("llama3-70b_64") == "llama3-70b_64.yaml"
    assert state.download_name("...") == "scenario.yaml"
    assert len(state.download_name("n" * 300)) == 64 + len(".yaml")


def test_edited_hardware_yaml_over_the_limit_is_refused(guard):
    at = _group(AppTest.from_file(str(APP), default_timeout=TIMEOUT_S).run(), "Hardware")
    at.sidebar.radio(key="hw_source").set_value("Edit YAML").run()
    at.text_area(key="hw_yaml_text").input("# " + "x" * 2**20).run()
    _assert_refused(at, "hardware YAML", "the limit is 1 MiB")


# --------------------------------------------------- markdown: no fetch by the viewer
def test_names_and_messages_cannot_inject_markdown():
    """An image in a name or a message would make the viewer's browser fetch its address;
    every name and message is shown escaped, as text."""
    from perfmodel.spec.presets import load_model
    model = load_model(_example()["model"]).model_dump(mode="json", exclude_none=True)
    model["name"] = "![x](https://tracker.example/m.png)"
    at = _open_link(_link(_with(model=model)))
    assert not at.exception
    title = at.title[0].value
    assert "![x](" not in title and _shown(title).startswith("Plan: ![x](https://tracker.example/m.png) on")
    at = _open_link(_link(_with(hardware="![x](https://tracker.example/e.png)")))
    assert at.error and all("![x](" not in e.value for e in at.error)


# ------------------------------------------------------------------- typed inputs
@pytest.mark.parametrize("counts, fragment", [
    (",".join(str(8 * i) for i in range(1, 18)), "17 counts; the limit is 16"),
    ("0", "whole numbers from 1"),
    ("-8", "whole numbers from 1"),
    ("²", "whole numbers from 1"),
    ("9" * 30, "whole numbers from 1"),
])
def test_search_gpu_counts_are_bounded(counts, fragment):
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT_S).run()
    at.switch_page("pages_/search.py").run()
    at.text_input(key="search_counts").input(counts)
    next(b for b in at.button if b.label == "Search").click().run()
    _assert_refused(at, "GPU counts", fragment)


def test_a_long_pipeline_is_not_drawn_bar_by_bar():
    """The Plan page draws the schedule with at least pp micro-batches: 2 x pp^2 bars. pp 256
    would be 131,072 (pp 1,024, two million); the page says so instead of drawing them."""
    model = dict(name="deep", num_layers=256, hidden_size=1024, num_attention_heads=16, ffn_hidden_size=4096,
                 vocab_size=32000)
    data = _with(model=model, num_gpus=256, parallelism=dict(pp=256), global_batch_size=1024, micro_batch_size=1,
                 seq_length=1024)
    t0 = time.monotonic()
    at = _open_link(_link(data))
    at.radio(key="plan_detail").set_value("Pipeline schedule").run()
    assert time.monotonic() - t0 < 60
    assert not at.exception and not _errors(at), _errors(at)
    assert any(c.value.startswith("Not drawn: 131,072 bars (256 stages)") for c in at.caption)
    assert len(at.get("vega_lite_chart")) == 2   # breakdown and memory; the schedule is not drawn


def _finishes(code: str, seconds: float) -> bool:
    """Whether ``code`` runs to its end within ``seconds`` in a child process held to 2 GiB
    (running out of memory is not finishing)."""
    prog = "import resource; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n" + textwrap.dedent(code)
    try:
        done = subprocess.run([sys.executable, "-c", prog], cwd=ROOT, timeout=seconds, capture_output=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1"})
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


_PREDICT = """
    import yaml
    import perfmodel as pm
    from perfmodel.spec.errors import InputError
    data = yaml.safe_load(open("perfmodel/data/example_scenario.yaml"))
    data.update({extra})
    try:
        pm.predict(pm.parse_scenario(data))
    except InputError:
        pass
"""


def test_pipeline_layout_repeat_bomb_finishes():
    assert _finishes(_PREDICT.format(extra='pipeline_layout="(t*99999999|)*99999999"'), 15)


def test_a_billion_layers_finishes():
    assert _finishes(_PREDICT.format(extra='model=dict(name="x", num_layers=10**9, hidden_size=8192, '
                                           'num_attention_heads=64, ffn_hidden_size=28672, vocab_size=128256)'), 15)


# ----------------------------------------------------------------- the launcher
def test_perfmodel_app_listens_on_loopback_unless_told(monkeypatch, capsys):
    from perfmodel import cli
    calls = []
    monkeypatch.setattr(os, "execv", lambda exe, argv: calls.append(argv))
    for argv in (["app"], ["app", "--port", "9000", "--host", "0.0.0.0"]):
        args = cli.build_parser().parse_args(argv)
        args.func(args)
    default, opened = calls
    assert default[1].endswith("app/serve.py")
    assert default[default.index("--server.address") + 1] == "127.0.0.1"
    assert "--server.allowedHosts" not in default
    assert opened[opened.index("--server.address") + 1] == "0.0.0.0"
    assert opened[opened.index("--server.allowedHosts") + 1] == "*"
    err = capsys.readouterr().err
    assert "listening on 0.0.0.0:9000" in err and "anyone who can reach this machine" in err


def test_app_config_keeps_the_server_to_itself():
    import tomllib
    cfg = tomllib.loads((APP.parent / ".streamlit" / "config.toml").read_text())
    assert cfg["server"]["address"] == "127.0.0.1"
    assert cfg["browser"]["gatherUsageStats"] is False
    assert cfg["server"]["headless"] is True
    assert set(cfg["server"]["allowedHosts"]) == {"localhost", "127.0.0.1", "::1"}


# --------------------------------------------------------- the real server, guarded
SITECUSTOMIZE = '''
"""Test guard for the app server: refuse and log any network call that leaves this machine,
any bind to a non-loopback address (logged only) and any opening of the crafted files."""
import ipaddress, os, socket, sys, traceback

_LOG = os.environ["PERFMODEL_GUARD_LOG"]
_FILES = {files!r}


def _loopback(host):
    if host is None:
        return True
    if isinstance(host, bytes):
        host = host.decode(errors="replace")
    if not isinstance(host, str):
        return True
    host = host.strip("[]").split("%")[0].lower()
    if host in ("localhost", "ip6-localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _note(what):
    where = "; ".join(f"{{os.path.basename(f.filename)}}:{{f.lineno}}" for f in traceback.extract_stack(limit=9)[:-2])
    with open(_LOG, "a") as f:
        f.write(f"{{os.getpid()}} {{what}} [{{where}}]\\n")


def _hook(event, args):
    if event == "open" and isinstance(args[0], str) and os.path.normpath(args[0]) in _FILES:
        _note(f"open {{args[0]}}")
        raise PermissionError(f"test guard: open {{args[0]}}")
    if event in ("socket.connect", "socket.sendto", "socket.sendmsg") and isinstance(args[1], tuple):
        if args[0].family in (socket.AF_INET, socket.AF_INET6) and not _loopback(args[1][0]):
            _note(f"{{event}} {{args[1]}}")
            raise PermissionError(f"test guard: {{event}} {{args[1]}}")
    elif event == "socket.bind" and isinstance(args[1], tuple):
        if args[0].family in (socket.AF_INET, socket.AF_INET6) and not _loopback(args[1][0]):
            _note(f"bind {{args[1][0]}}")
    elif event in ("socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr"):
        if not _loopback(args[0]):
            _note(f"{{event}} {{args[0]}}")
            raise PermissionError(f"test guard: {{event}} {{args[0]}}")


sys.addaudithook(_hook)
with open(_LOG + ".active", "a") as f:
    f.write(f"{{os.getpid()}}\\n")
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> set[str]:
    """Local addresses of the TCP sockets listening on ``port`` (from /proc/net/tcp and tcp6)."""
    hosts = set()
    for name, size in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 16)):
        if not Path(name).exists():
            continue
        for line in Path(name).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            addr, p = local.split(":")
            if state != "0A" or int(p, 16) != port:
                continue
            raw = bytes.fromhex(addr)
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, size, 4))   # host order per 32-bit word
            hosts.add(socket.inet_ntop(socket.AF_INET if size == 4 else socket.AF_INET6, raw))
    return hosts


def _session(port: int, query: str) -> list[str]:
    """A browser's session over the WebSocket: run the app with ``query``; the alerts it shows."""
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
    from websockets.sync.client import connect
    alerts = []
    with connect(f"ws://127.0.0.1:{port}/_stcore/stream", subprotocols=["streamlit"], max_size=None,
                 open_timeout=30) as ws:
        msg = BackMsg()
        msg.rerun_script.query_string = query
        ws.send(msg.SerializeToString())
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            fm = ForwardMsg()
            fm.ParseFromString(ws.recv(timeout=90))
            if fm.WhichOneof("type") == "script_finished":
                return alerts
            if fm.WhichOneof("type") == "delta" and fm.delta.WhichOneof("type") == "new_element":
                el = fm.delta.new_element
                if el.WhichOneof("type") == "alert":
                    alerts.append(_shown(el.alert.body))
                elif el.WhichOneof("type") == "exception":
                    alerts.append(f"EXCEPTION {el.exception.message}")
    raise AssertionError("the script did not finish")


def _refused(port: int, host: str = "127.0.0.1", origin: str | None = None) -> bool:
    """Whether a WebSocket to this server that names ``host`` in its Host header and comes from
    ``origin`` is turned away (the connection itself always goes to 127.0.0.1)."""
    from websockets.exceptions import InvalidHandshake
    from websockets.sync.client import connect
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        with connect(f"ws://{host}:{port}/_stcore/stream", sock=sock, subprotocols=["streamlit"], origin=origin,
                     open_timeout=30):
            return False
    except InvalidHandshake:
        return True
    finally:
        sock.close()


LAUNCHES = {
    # perfmodel app from another directory: the launcher alone must carry the settings
    "perfmodel-app": (lambda port: [sys.executable, "-c", "import sys; from perfmodel.cli import main; "
                                    "sys.exit(main(sys.argv[1:]))", "app", "--port", str(port)], None),
    # the README's other way, from the repo root
    "streamlit-run": (lambda port: [sys.executable, "-m", "streamlit", "run", "app/streamlit_app.py",
                                    "--server.port", str(port)], ROOT),
    # opened on purpose: every interface, and still no look-ups
    "perfmodel-app-host-0.0.0.0": (lambda port: [sys.executable, "-c", "import sys; from perfmodel.cli import main; "
                                                 "sys.exit(main(sys.argv[1:]))", "app", "--port", str(port),
                                                 "--host", "0.0.0.0"], None),
}


@pytest.mark.parametrize("launch", LAUNCHES)
def test_server_makes_no_outbound_call_and_binds_as_told(launch, tmp_path):
    """The real server, guarded: start it, fetch the page and its health endpoint, run a session
    with a crafted link, try a cross-origin and a DNS-rebinding WebSocket, wait, stop it. The
    guard's log must be empty (no look-up, no connection off this machine, no crafted file
    opened), and the server must listen on 127.0.0.1 only (0.0.0.0 when told)."""
    pytest.importorskip("websockets")
    if not Path("/proc/net/tcp").exists():
        pytest.skip("reads the listening sockets from /proc/net/tcp (Linux)")
    guard_dir = tmp_path / "guard"
    guard_dir.mkdir()
    (guard_dir / "sitecustomize.py").write_text(SITECUSTOMIZE.format(files=set(CRAFTED_FILES)))
    log = tmp_path / "guard.log"
    port = _free_port()
    make, cwd = LAUNCHES[launch]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(guard_dir), str(ROOT)]),
           "PERFMODEL_GUARD_LOG": str(log), "PYTHONUNBUFFERED": "1"}
    out = open(tmp_path / "server.out", "w")
    proc = subprocess.Popen(make(port), cwd=cwd or tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT)
    opened = launch.endswith("0.0.0.0")
    try:
        base = f"http://127.0.0.1:{port}"
        http = urllib.request.build_opener(urllib.request.ProxyHandler({}))   # straight to the server
        deadline = time.monotonic() + 60
        while True:
            try:
                with http.open(f"{base}/_stcore/health", timeout=5) as r:
                    assert r.status == 200
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "server.out").read_text()
                time.sleep(0.5)
        with http.open(f"{base}/", timeout=10) as r:
            assert r.status == 200 and b"<html" in r.read().lower()
        problems = []   # gathered, so a failure lists everything the server got wrong
        if launch != "streamlit-run" and not _refused(port, origin="http://evil.example"):
            problems.append("accepted a cross-origin WebSocket before the first session")   # look-ups off from start
        alerts = _session(port, "s=" + _link(_with(hardware="/proc/self/environ")))
        assert any("unknown hardware '/proc/self/environ'" in a for a in alerts), alerts
        assert not any(a.startswith("EXCEPTION") for a in alerts), alerts
        if not _refused(port, origin="http://evil.example"):
            problems.append("accepted a cross-origin WebSocket")
        if _refused(port, host="localhost"):
            problems.append("refused a WebSocket to localhost")
        if not opened and not _refused(port, host="evil.example"):
            problems.append("accepted a WebSocket naming evil.example (DNS rebinding)")
        time.sleep(3)
        listening = _listening(port)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        out.close()
    assert (tmp_path / "guard.log.active").exists(), "the guard did not load in the server"
    notes = log.read_text().splitlines() if log.exists() else []
    if listening != ({"0.0.0.0"} if opened else {"127.0.0.1"}):
        problems.append(f"listening on {sorted(listening)}")
    problems += [n for n in notes if not (opened and " bind 0.0.0.0 " in n)]
    assert problems == [], "\n".join(problems)
    if opened:
        assert "anyone who can reach this machine" in (tmp_path / "server.out").read_text()


def test_the_server_guard_catches_a_lookup(tmp_path):
    """The guard itself: a look-up of a public name and a UDP connect to 8.8.8.8 are refused and logged."""
    guard_dir = tmp_path / "guard"
    guard_dir.mkdir()
    (guard_dir / "sitecustomize.py").write_text(SITECUSTOMIZE.format(files=set(CRAFTED_FILES)))
    log = tmp_path / "guard.log"
    code = ("import socket\n"
            "for call in (lambda: socket.getaddrinfo('checkip.amazonaws.com', 80),\n"
            "             lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).connect(('8.8.8.8', 1)),\n"
            "             lambda: open('/proc/self/environ')):\n"
            "    try:\n"
            "        call()\n"
            "    except PermissionError:\n"
            "        pass\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60,
                   env={**os.environ, "PYTHONPATH": str(guard_dir), "PERFMODEL_GUARD_LOG": str(log)})
    notes = log.read_text()
    for caught in ("getaddrinfo checkip.amazonaws.com", "socket.connect ('8.8.8.8', 1)", "open /proc/self/environ"):
        assert caught in notes, notes


# ------------------------------------------------------------ crafted training logs
LOG_UPLOADS = {
    "alias-bomb": (b"step_times_s: &a [1.0, 1.0]\ntimers_s:\n" + b"".join(
        f"  t{i}: *a\n".encode() for i in range(10)), "must be a finite number"),
    "path-as-a-value": (b"step_time_s: /proc/self/environ\n", "must be a finite number"),
    "nested-200-deep": (b"step_time_s: " + _nested(200) + b"\n", r"nest(s|ed)|must be a finite number"),
    "binary": (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe" * 50, "not UTF-8 text"),
    "oversized": (b"# " + b"x" * (2**20), "the limit is 1 MiB"),
    "many-runs": (("num_gpus,step_time_s\n" + "".join(f"{n},1.0\n" for n in range(1, 200))).encode(),
                  r"runs \(job sizes\); at most 64"),
    "unknown": (b"GET /etc/passwd HTTP/1.1\n", "not a training log"),
}


@pytest.mark.parametrize("name", LOG_UPLOADS)
def test_crafted_log_upload_is_refused_in_one_line(name, guard):
    """A training log uploaded on the Diagnose page is text, bounded, and never a path: its name
    and its values are labels and numbers, nothing is opened."""
    data, fragment = LOG_UPLOADS[name]
    t0 = time.monotonic()
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT_S).run()
    at.switch_page("pages_/diagnose.py").run()
    at.radio(key="dg_source").set_value("Upload a log").run()
    at.file_uploader(key="dg_log").upload("../../etc/passwd.log", data, "application/octet-stream").run()
    assert time.monotonic() - t0 < 60
    _assert_refused(at, fragment)
    assert guard.log == []
