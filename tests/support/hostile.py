"""A hostile share link: a scenario whose every free-text field is Markdown and HTML that would make
a browser fetch from, or link to, an outside host (issue 48). Used by the app and browser tests."""

from __future__ import annotations

import base64
import json
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EVIL = "![x](https://evil.example/a.png) <img src=https://evil.example/b.png> https://evil.example/c www.evil.example"


def hostile_link() -> str:
    """A link's ``s=`` value: the example job named ``EVIL`` on an inline H100 whose names,
    price provider and every citation are ``EVIL``."""
    from perfmodel.spec.hardware import load_hardware
    from perfmodel.spec.scenario import load_scenario, scenario_to_dict
    sc = json.loads(json.dumps(scenario_to_dict(load_scenario(ROOT / "perfmodel" / "data" / "example_scenario.yaml"))))
    hw = json.loads(json.dumps(load_hardware("h100-sxm").model_dump(mode="json")))
    hw.update(id="h100-hostile", name=EVIL, notes=EVIL, sources={k: EVIL for k in hw["sources"]})
    for part in ("gpu", "scale_up", "scale_out", "host_link"):
        hw[part]["name"] = EVIL
    hw["price"]["cloud_provider"] = EVIL
    sc.update(name=EVIL[:64], hardware=hw)
    return base64.urlsafe_b64encode(zlib.compress(json.dumps(sc).encode(), 9)).decode().rstrip("=")
