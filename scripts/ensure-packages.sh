#!/usr/bin/env bash
# Makes sure the Debian packages the tests need are installed: each argument
# is COMMAND:PACKAGE, and PACKAGE is installed with apt-get when COMMAND is
# not on PATH. Says clearly what to do when it cannot (no root, no sudo).
#   bash scripts/ensure-packages.sh etcd:etcd-server zsh:zsh
set -euo pipefail

missing=()
for pair in "$@"; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
done
[ "${#missing[@]}" -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=sudo
  else
    echo "missing: ${missing[*]}; installing needs root: run 'sudo apt-get install -y ${missing[*]}' and try again." >&2
    exit 1
  fi
else
  SUDO=
fi
echo "Installing Debian's ${missing[*]} (the tests run them)..." >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >&2
$SUDO apt-get install -y -qq "${missing[@]}" >&2
for pair in "$@"; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || {
    echo "${pair#*:} was installed but no ${pair%%:*} is on PATH" >&2
    exit 1
  }
done
