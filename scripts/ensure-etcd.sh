#!/usr/bin/env bash
# Makes sure Debian's etcd-server (etcd 3.4) is installed: every
# metropolis-node runs one, and so do the consensus, curator, cluster and
# end-to-end tests. With `--tests`, also what only the tests need: zsh (the
# completion script metroctl prints must parse).
set -euo pipefail
here="$(dirname "$0")"

had_etcd=$(command -v etcd || true)
pairs=(etcd:etcd-server)
[ "${1:-}" = "--tests" ] && pairs+=(zsh:zsh)
bash "$here/ensure-packages.sh" "${pairs[@]}"
# Debian starts an etcd service on install; the project runs its own etcd processes.
if [ -z "$had_etcd" ] && command -v systemctl >/dev/null 2>&1; then
  systemctl disable --now etcd >/dev/null 2>&1 || sudo -n systemctl disable --now etcd >/dev/null 2>&1 || true
fi
