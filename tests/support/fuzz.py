"""Fuzzing harness: generators of careless and hostile inputs, and the checks every answer must pass.

Each ``check_*`` function runs one input through one entry point and returns an ``Outcome``:

==============  ======================================================================
ok              an answer whose numbers pass the physical checks
input_error     an ``InputError``: one line, ``<field>: <reason>``, exit status 2 in the CLI
traceback       any other exception (a defect)
wrong_exit      a CLI exit status other than 0 or 2, or output that is not what it claims
violation       an answer that breaks an invariant (non-finite, parts not summing, MFU > 1,
                invalid JSON, faster hardware slower, goodput outside [0, 1])
hang            an input that took longer than ``HANG_S`` (bounded work must stay bounded)
==============  ======================================================================

The same generators drive the bounded pytest suite (``tests/properties/test_fuzz.py``) and the longer run of
``scripts/fuzz.py``, which prints the counts.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import random
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from perfmodel.spec.errors import InputError

HANG_S = 20.0
"""An input that takes longer than this is a hang: the largest legal job predicts in well under
a second, and every bound is checked before work."""
KINDS = ("ok", "input_error", "traceback", "wrong_exit", "violation", "hang")

SMALL_MODELS = ("llama3-8b", "llama2-7b", "mixtral-8x7b", "qwen3-30b-a3b", "megatron-1.7b", "gpt-oss-120b",
                "deepseek-v3", "llama3-70b")
HARDWARE = ("h100-sxm", "h200-sxm", "b200", "gb200-nvl72", "a100-sxm-80gb", "mi300x", "h100-sxm-hbm2e-500w")
TINY_MODEL = dict(name="tiny", num_layers=4, hidden_size=256, num_attention_heads=8, num_query_groups=4,
                  ffn_hidden_size=1024, gated_mlp=True, vocab_size=1000)
TINY_MOE = dict(TINY_MODEL, name="tiny-moe", moe=dict(num_experts=8, top_k=2, expert_ffn_hidden_size=512))


def _deep(depth: int):
    out: object = 1
    for _ in range(depth):
        out = [out]
    return out


HOSTILE_VALUES = (
    2 ** 63, 2 ** 64 + 1, -(2 ** 63) - 1, 10 ** 4301, -1, 0, 1.5, "64", "1e3", True, False, None,
    float("inf"), float("-inf"), float("nan"), "x" * 300, "", [], {}, [1, 2], {"a": 1}, _deep(2_000),
    "/proc/self/environ", "/dev/zero", "../../etc/passwd", "https://example.com/x.yaml", "h100-sxm\nx",
    "\x00", "é" * 70, 1e308, 5e-324, -0.0,
)
"""Values a careless user or an attacker puts into any field."""

HOSTILE_TEXTS = (
    b"", b"\x00\x01\x02\xff\xfe" * 100, b"\x89PNG\r\n\x1a\n" + bytes(range(256)), b"[" * 100_000,
    b"a: 1\na: 2\n", b"? |\n  a\n  b\n: 1\n", b"!!python/object/apply:os.system ['true']\n",
    b"a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
    b"c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
    b"e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n",
    b"hardware: h100-sxm\nnum_gpus: 8\nnum_gpus: 16\n", "caf\xe9: 1\n".encode("latin-1"),
    b"- 1\n- 2\n", b"just text", b"{" + b'"a":' * 50_000 + b"1" + b"}" * 50_000,
    b"num_gpus: .inf\n", b"\xef\xbb\xbfhardware: h100-sxm\n",
)
"""Whole files: binary, empty, deep, duplicate keys, unsafe tags, a billion laughs, bad encodings."""


@dataclass
class Tally:
    """How many inputs ended how, with the first few examples of each defect."""

    counts: dict = field(default_factory=lambda: {k: 0 for k in KINDS})
    examples: dict = field(default_factory=dict)

    def add(self, outcome: "Outcome") -> None:
        self.counts[outcome.kind] += 1
        if outcome.defect:
            self.examples.setdefault(outcome.kind, []).append(outcome.detail[:300])

    @property
    def tried(self) -> int:
        return sum(self.counts.values())

    @property
    def defects(self) -> int:
        return sum(self.counts[k] for k in ("traceback", "wrong_exit", "violation", "hang"))


@dataclass(frozen=True)
class Outcome:
    kind: str
    detail: str = ""

    @property
    def defect(self) -> bool:
        return self.kind not in ("ok", "input_error")


class _Timeout(Exception):
    pass


@contextlib.contextmanager
def _deadline(seconds: float):
    """Interrupt work that outlasts ``seconds`` (main thread, POSIX) so a hang is counted."""
    def fire(signum, frame):
        raise _Timeout()
    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _input_error_ok(exc: InputError) -> Outcome:
    text = str(exc)
    if "\n" in text or "\r" in text:
        return Outcome("violation", f"two-line error: {text[:200]!r}")
    if ": " not in text or len(text) > 4000:
        return Outcome("violation", f"error without a field or far too long: {text[:200]!r}")
    return Outcome("input_error", text)


def guarded(call) -> Outcome:
    """Run ``call()`` (which returns an Outcome) and classify whatever escapes it."""
    t0 = time.perf_counter()
    try:
        with _deadline(HANG_S):
            out = call()
    except _Timeout:
        return Outcome("hang", f"over {HANG_S} s")
    except InputError as exc:
        out = _input_error_ok(exc)
    except RecursionError as exc:
        out = Outcome("traceback", f"RecursionError: {str(exc)[:100]}")
    except Exception as exc:  # noqa: BLE001 - that is what is being counted
        out = Outcome("traceback", f"{type(exc).__name__}: {str(exc)[:200]}")
    if time.perf_counter() - t0 > HANG_S:
        return Outcome("hang", f"{time.perf_counter() - t0:.1f} s")
    return out


# ----------------------------------------------------------------------------- generators
def valid_scenario(rng: random.Random, software: bool = False) -> dict:
    """A scenario that is often valid: a known model and GPU, degrees that often divide; with
    ``software``, random software options and a studies section too (``fuzz_more``)."""
    model = rng.choice(SMALL_MODELS + (TINY_MODEL, TINY_MOE))
    n = rng.choice([1, 2, 4, 8, 16, 32, 64, 128, 256])
    tp = rng.choice([d for d in (1, 2, 4, 8) if n % d == 0])
    pp = rng.choice([d for d in (1, 2, 4) if n % (tp * d) == 0])
    cp = rng.choice([d for d in (1, 2) if n % (tp * pp * d) == 0])
    dp = n // (tp * pp * cp)
    mbs = rng.choice([1, 1, 2, 4])
    gbs = dp * mbs * rng.choice([1, 2, 4, 8, 16])
    par = dict(tp=tp, pp=pp, cp=cp, zero_stage=rng.choice([0, 1, 2, 3]))
    if pp > 1 and rng.random() < 0.3:
        par["vpp"] = 2
    is_moe = isinstance(model, dict) and "moe" in model or model in ("mixtral-8x7b", "qwen3-30b-a3b",
                                                                      "gpt-oss-120b", "deepseek-v3")
    if is_moe and rng.random() < 0.5:
        par["ep"] = rng.choice([d for d in (1, 2, 4, 8) if (dp * cp * tp) % d == 0])
    d = dict(name="fuzz", hardware=rng.choice(HARDWARE), num_gpus=n, model=model,
             seq_length=rng.choice([512, 1024, 2048, 4096, 8192]), global_batch_size=gbs,
             micro_batch_size=mbs, parallelism=par, recompute=rng.choice(["none", "selective", "full"]),
             precision=rng.choice(["bf16", "bf16", "fp8", "fp16"]))
    if rng.random() < 0.5:
        d["training_tokens"] = rng.choice([1e9, 1e11, 1.5e13])
    if software:
        from support.fuzz_more import software_options, studies_section
        d["software"] = software_options(rng, d)
        if rng.random() < 0.3:
            d["studies"] = studies_section(rng)
    return d


def _paths(d, prefix=()):
    if isinstance(d, dict):
        for k, v in d.items():
            yield prefix + (k,)
            yield from _paths(v, prefix + (k,))


def mutate(d: dict, rng: random.Random) -> dict:
    """``d`` with one field set to a hostile value, or a hostile key added."""
    d = json.loads(json.dumps(d))
    paths = list(_paths(d))
    roll = rng.random()
    target = d
    path = rng.choice(paths)
    for k in path[:-1]:
        target = target[k]
    if roll < 0.85:
        target[path[-1]] = rng.choice(HOSTILE_VALUES)
    elif roll < 0.95:
        target[rng.choice(["bandwith", "num_gpus\n", "x" * 300, "é", "__class__"])] = 1
    else:
        del target[path[-1]]
    return d


def scenario_input(rng: random.Random) -> dict:
    """Half valid scenarios, half mutated ones."""
    d = valid_scenario(rng)
    return d if rng.random() < 0.5 else mutate(d, rng)


# -------------------------------------------------------------------------------- checks
def finite_prediction(p) -> str:
    """'' when a prediction passes the physical checks, else what is wrong."""
    d = p.to_dict()
    for k, v in d.items():
        if isinstance(v, float) and not math.isfinite(v):
            return f"{k} = {v}"
    parts = sum(p.breakdown_s.values())
    if not math.isclose(parts, p.step_time_s, rel_tol=1e-9):
        return f"breakdown sums to {parts}, step {p.step_time_s}"
    if not 0 < p.mfu <= 1:
        return f"mfu = {p.mfu}"
    if p.step_time_s <= 0 or p.memory_per_gpu_bytes <= 0:
        return f"step {p.step_time_s}, memory {p.memory_per_gpu_bytes}"
    if any(v < 0 for v in p.breakdown_s.values()):
        return f"negative part in {p.breakdown_s}"
    return ""


def check_api(d) -> Outcome:
    """parse, then predict, through the Python API (the default calibration profile on)."""
    from perfmodel.api import predict
    from perfmodel.spec.scenario import parse_scenario

    def call():
        p = predict(parse_scenario(d))
        bad = finite_prediction(p)
        return Outcome("violation", bad) if bad else Outcome("ok")
    return guarded(call)


def _cli(argv: list[str]) -> tuple[int, str, str]:
    from perfmodel.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:   # argparse usage errors
            code = exc.code if isinstance(exc.code, int) else 2
    return code, out.getvalue(), err.getvalue()


def _strict_json(text: str):
    def refuse(name):
        raise ValueError(f"{name} in JSON output")
    return json.loads(text, parse_constant=refuse)


def check_cli(argv: list[str], json_out: bool) -> Outcome:
    """One CLI call: exit 0 with (valid JSON) output, or exit 2 with one line on stderr."""
    def call():
        code, out, err = _cli(argv)
        if code == 0:
            if json_out:
                try:
                    _strict_json(out)
                except ValueError as exc:
                    return Outcome("violation", f"{argv[:2]}: invalid JSON ({exc})")
            return Outcome("ok")
        if code == 2:
            lines = err.strip().splitlines()
            if len(lines) != 1 or not lines[0].startswith("perfmodel"):
                return Outcome("violation", f"{argv[:2]}: exit 2 with {len(lines)} lines: {err[:200]!r}")
            return Outcome("input_error", lines[0])
        return Outcome("wrong_exit", f"{argv[:2]}: exit {code}: {err.strip()[:200]}")
    return guarded(call)


def check_cli_scenario(d, tmp: Path, rng: random.Random) -> Outcome:
    """A scenario file through a random command of the CLI."""
    path = tmp / "scenario.yaml"
    try:
        text = yaml.safe_dump(d, allow_unicode=True)
    except (yaml.YAMLError, RecursionError, ValueError):   # too deep or too long for the dumper: by hand
        text = "hardware: h100-sxm\nnum_gpus: " + rng.choice(["[" * 2_000 + "]" * 2_000, "1" + "0" * 4_400]) + "\n"
    path.write_text(text)
    cmd = rng.choice(["predict", "predict", "describe", "search", "scale"])
    argv = [cmd, str(path), "--format", "json"]
    if cmd == "search":
        argv += ["--max-micro-batch-size", "1", "--recompute", "none"]
    if cmd == "scale":
        argv += ["--gpus", rng.choice(["8,16", "3,64", "1", "0", "-8", "abc", "8," * 3 + "9999999999999999999999"]),
                 "--recompute", "none", "--max-micro-batch-size", "1"]
    return check_cli(argv, json_out=True)


def check_file(content: bytes, tmp: Path, rng: random.Random) -> Outcome:
    """A hostile file where the CLI expects a scenario, a case list, or a calibration input."""
    path = tmp / rng.choice(["s.yaml", "s.json", "cases.yaml", "log.txt", "results.yaml"])
    path.write_bytes(content)
    cmd = rng.choice([["predict", str(path), "--format", "json"], ["describe", str(path), "--format", "json"],
                      ["validate", str(path), "--format", "json"],
                      ["calibrate", str(path), "--hardware", "h100-sxm", "-o", str(tmp / "p.yaml")]])
    return check_cli(cmd, json_out="--format" in cmd)


def scaled_hardware(hw_id: str, factors: dict) -> dict:
    """The catalogue spec ``hw_id`` as an inline mapping with some rates multiplied (>= 1)."""
    from perfmodel.spec.hardware import load_hardware

    data = load_hardware(hw_id).model_dump(mode="json", exclude_none=True)   # an edited spec: its id kept
    g = data["gpu"]
    f = factors.get("flops", 1.0)
    g["peak_dense_tflop_per_s"] = {k: v * f for k, v in g["peak_dense_tflop_per_s"].items()}
    g["hbm_bandwidth_gb_per_s"] *= factors.get("hbm", 1.0)
    data["scale_up"]["bandwidth_per_direction_gb_per_s"] *= factors.get("scale_up", 1.0)
    data["scale_out"]["nic_bandwidth_gbit_per_s"] *= factors.get("scale_out", 1.0)
    data["host_link"]["bandwidth_per_direction_gb_per_s"] *= factors.get("host_link", 1.0)
    return data


def check_faster_hardware(d: dict, rng: random.Random, profile="auto") -> Outcome:
    """The same job on hardware no slower in any rate is never slower (and no less fitting), under
    ``profile`` (default: the calibration profile, which the edited spec keeps, scaled)."""
    from perfmodel.api import predict
    from perfmodel.spec.scenario import parse_scenario

    def call():
        p0 = predict(parse_scenario(d), profile=profile)
        hw_id = d["hardware"]
        factors = {k: rng.choice([1.0, 1.0, 1.5, 2.0, 10.0]) for k in ("flops", "hbm", "scale_up", "scale_out",
                                                                        "host_link")}
        p1 = predict(parse_scenario({**d, "hardware": scaled_hardware(hw_id, factors)}), profile=profile)
        if p1.step_time_s > p0.step_time_s * (1 + 1e-12):
            return Outcome("violation", f"{hw_id} x {factors}: {p1.step_time_s!r} s > {p0.step_time_s!r} s "
                                        f"({p1.breakdown_s} vs {p0.breakdown_s})")
        return Outcome("ok")
    return guarded(call)


def check_goodput(rng: random.Random) -> Outcome:
    """Goodput lies in [0, 1] and falls (weakly) as the failure rate rises."""
    from perfmodel.formulas.goodput import goodput_fraction
    from perfmodel.spec.reliability import FailureModel

    def call():
        n = rng.choice([1, 8, 1024, 16_384, 1_000_000])
        rates = sorted(rng.choice([0.0, 1e-308, 1e-12, 1e-6, 1.97e-5, 1e-3, 0.5]) for _ in range(2))
        state = rng.choice([1e9, 1e12, 1e15])
        g = [float(goodput_fraction(n, state, FailureModel(gpu_failures_per_gpu_hour=r)).fraction) for r in rates]
        if not all(0.0 <= x <= 1.0 for x in g) or g[1] > g[0] + 1e-12:
            return Outcome("violation", f"goodput {g} at rates {rates}, {n} GPUs")
        if rates[0] == 1e-308 and g[0] < 0.99:
            return Outcome("violation", f"goodput {g[0]} at 1e-308 failures per GPU-hour")
        return Outcome("ok")
    return guarded(call)


# ----------------------------------------------------------------------------------- app
APP = Path(__file__).resolve().parents[2] / "app" / "streamlit_app.py"


def encode_link(data) -> str:
    """A share link's ``?s=`` value for any JSON-able data (the app's own encoding)."""
    import base64
    import zlib

    try:
        raw = json.dumps(data, separators=(",", ":")).encode()
    except (RecursionError, ValueError):   # too deep for the encoder: a link as deep, written by hand
        raw = b'{"name": ' + b"[" * 5_000 + b"]" * 5_000 + b"}"
    return base64.urlsafe_b64encode(zlib.compress(raw, 9)).decode().rstrip("=")


def hostile_link(rng: random.Random) -> str:
    """A crafted share link: a mutated scenario, a path for hardware or model, damaged text,
    or a small link that decompresses to a very large or very deep document."""
    import base64
    import zlib

    roll = rng.random()
    if roll < 0.5:
        return encode_link(scenario_input(rng))
    if roll < 0.7:
        d = valid_scenario(rng)
        d[rng.choice(["hardware", "model"])] = rng.choice(["/proc/self/environ", "/dev/zero", "../../etc/passwd",
                                                           "/etc/hostname", "file:///etc/passwd"])
        return encode_link(d)
    if roll < 0.8:
        bomb = zlib.compress(b"[" * 5_000_000, 9)
        return base64.urlsafe_b64encode(bomb).decode().rstrip("=")
    if roll < 0.9:
        return rng.choice(["garbage", "", "=" * 10, "%00", "A" * 100_000, "eJw"])
    return encode_link({"hardware": {"id": "../../escape", "name": "x"}, "num_gpus": 8})


def check_app(link: str) -> Outcome:
    """The app opened on a crafted link: no exception, errors as one line, no file read."""
    from streamlit.testing.v1 import AppTest

    def call():
        at = AppTest.from_file(str(APP), default_timeout=60)
        at.query_params["s"] = link
        at.run()
        if at.exception:
            return Outcome("traceback", str(at.exception[0].value)[:300])
        texts = [e.value for e in at.error] + [w.value for w in at.warning]
        internal = [t for t in texts if t.startswith("internal error")]
        if internal:   # the app's last line of defence caught an exception: a defect all the same
            return Outcome("traceback", internal[0][:300])
        if any("\n" in t for t in texts):
            return Outcome("violation", f"multi-line message: {texts}")
        leaked = [t for t in texts if "root:" in t or "PATH=" in t]
        hw_text = at.session_state["hw_yaml_text"] if "hw_yaml_text" in at.session_state else ""
        if leaked or "root:" in hw_text or "PATH=" in hw_text:
            return Outcome("violation", "a server file reached the page")
        return Outcome("input_error" if texts else "ok", "; ".join(texts)[:200])
    return guarded(call)
