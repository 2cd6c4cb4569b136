#!/usr/bin/env bash
# Makes sure Debian's Chromium is installed: the observer's browser tests
# (e2e/observer.test.ts, packages/metroctl/test/observer-page.test.ts) drive
# it with playwright-core. Quiet when it is there.
set -euo pipefail
here="$(dirname "$0")"
bash "$here/ensure-packages.sh" chromium:chromium
