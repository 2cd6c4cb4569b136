#!/usr/bin/env bash
# Makes sure Debian's etcd-server (etcd 3.4) is installed: the consensus,
# curator, cluster and end-to-end tests run the real etcd server. Installs it
# with apt-get when missing; says clearly what to do when it cannot.
set -euo pipefail

if command -v etcd >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=sudo
  else
    echo "etcd is not installed, and installing it needs root: run 'sudo apt-get install -y etcd-server' and try again." >&2
    exit 1
  fi
else
  SUDO=
fi
echo "Installing Debian's etcd-server (every metropolis-node runs one; so do the consensus, curator and end-to-end tests)..." >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >&2
$SUDO apt-get install -y -qq etcd-server >&2
# Debian starts an etcd service on install; the project runs its own etcd processes.
if command -v systemctl >/dev/null 2>&1; then $SUDO systemctl disable --now etcd >/dev/null 2>&1 || true; fi
command -v etcd >/dev/null 2>&1 || { echo "etcd-server was installed but no etcd binary is on PATH" >&2; exit 1; }
