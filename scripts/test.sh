#!/usr/bin/env bash
# Install everything the tests need into .venv (and Debian's chromium for the browser test),
# then run the whole suite. Used by the README and by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[test]'
# An editable install does not byte-compile (a regular pip install does); compile once so that
# start-up does not recompile perfmodel on every run where PYTHONDONTWRITEBYTECODE is set.
.venv/bin/python -m compileall -q perfmodel calibration app >/dev/null
if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = "0" ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
      || echo "warning: could not install chromium; the browser test will be skipped" >&2
  else
    echo "warning: not root, cannot apt-get install chromium; the browser test will be skipped" >&2
  fi
fi
# The installed package must be whole: build the wheel, install it in a fresh venv outside the
# checkout and predict there (about 20-45 s; PERFMODEL_SKIP_WHEEL_CHECK=1 skips it locally).
if [ "${PERFMODEL_SKIP_WHEEL_CHECK:-0}" != "1" ]; then
  bash scripts/wheel_check.sh
fi
exec .venv/bin/python -m pytest "$@"
