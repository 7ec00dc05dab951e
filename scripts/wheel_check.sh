#!/usr/bin/env bash
# Build perfmodel's wheel, install it in a fresh virtual environment outside the checkout and run
# `perfmodel predict` on the example and `pm.predict` in Python there: the installed package must
# be whole (hardware specs and calibration profiles inside it), not lean on the source tree.
# Called by scripts/test.sh; needs .venv and pip's usual index or cache for the
# build backend (setuptools, wheel) and the four dependencies (numpy, scipy, pydantic, pyyaml).
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$(pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/perfmodel-wheel.XXXXXX")"
trap 'rm -rf "$work"' EXIT
# build from a copy of the committed-or-not tree, so that build/ and *.egg-info never touch the checkout
mkdir "$work/src"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git ls-files -co --exclude-standard -z | tar --null -T - -cf - | tar -xf - -C "$work/src"
else
  tar --exclude=./.venv --exclude=./build --exclude=./dist --exclude='*.egg-info' -cf - . | tar -xf - -C "$work/src"
fi
.venv/bin/python -m pip wheel -q --no-deps -w "$work/dist" "$work/src" >"$work/pip.log" 2>&1 \
  || { cat "$work/pip.log" >&2; exit 1; }
rm -rf "$work/src"
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q "$work"/dist/perfmodel-*.whl >"$work/pip.log" 2>&1 \
  || { cat "$work/pip.log" >&2; exit 1; }
cp perfmodel/data/example_scenario.yaml "$work/job.yaml"
cd "$work"
env -u PYTHONPATH -u PERFMODEL_HARDWARE_DIR -u PERFMODEL_PROFILE_DIR \
  "$work/venv/bin/perfmodel" predict job.yaml --format json > predict.json
# the app is not in the wheel: `perfmodel app` says so in one line, with no traceback
app_rc=0; app_out="$("$work/venv/bin/perfmodel" app 2>&1)" || app_rc=$?
if [ "$app_rc" != 2 ] || [ "$(printf '%s\n' "$app_out" | wc -l)" != 1 ]; then
  echo "wheel check: perfmodel app from the wheel gave exit $app_rc: $app_out" >&2; exit 1
fi
env -u PYTHONPATH -u PERFMODEL_HARDWARE_DIR -u PERFMODEL_PROFILE_DIR "$work/venv/bin/python" - "$repo" <<'PY'
import json, pathlib, sys
import perfmodel as pm
from perfmodel.spec.hardware import HARDWARE_DIR, list_hardware_ids
from perfmodel.spec.profile import PROFILE_DIR

repo = pathlib.Path(sys.argv[1]).resolve()
for where in (pathlib.Path(pm.__file__), HARDWARE_DIR, PROFILE_DIR):
    if repo in where.resolve().parents:
        sys.exit(f"wheel check: {where} is in the checkout, not the installed package")
want = sorted(p.stem for p in (repo / "hardware").glob("*.yaml"))
if list_hardware_ids() != want:
    sys.exit(f"wheel check: the wheel has hardware {list_hardware_ids()}, the checkout {want}")
if sorted(p.name for p in PROFILE_DIR.glob("*.yaml")) != sorted(p.name for p in (repo / "calibration/profiles").glob("*.yaml")):
    sys.exit("wheel check: the wheel's calibration profiles differ from calibration/profiles/")
p = pm.predict(pm.load_scenario("job.yaml"))
cli = json.loads(pathlib.Path("predict.json").read_text())
if abs(cli["step_time_s"] - p.step_time_s) > 1e-12 * p.step_time_s or not p.step_time_s > 0:
    sys.exit(f"wheel check: perfmodel predict gave {cli['step_time_s']}, pm.predict {p.step_time_s}")
print(f"wheel check: installed perfmodel predicts the example at {p.step_time_s:.4g} s per step "
      f"({len(want)} hardware specs, {len(list(PROFILE_DIR.glob('*.yaml')))} profiles shipped)")
PY
