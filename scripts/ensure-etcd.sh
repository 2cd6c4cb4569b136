#!/usr/bin/env bash
# Makes sure Debian's etcd-server (etcd 3.4) and etcd-client (etcdctl, whose
# `snapshot restore` metropolis-node --recover-from runs) are installed: every
# metropolis-node runs one, and so do the consensus, curator, cluster and
# end-to-end tests. With `--tests`, also what only the tests need: zsh (the
# completion script metroctl prints must parse), and, when run as root, what
# the multi-host testbed's tests need (local-cluster's testbed.ts: iptables
# and conntrack in network namespaces; faketime for clock skew; nsenter is
# util-linux's, always there). Without root those tests are skipped, saying
# why, so the packages are not asked for.
set -euo pipefail
here="$(dirname "$0")"
# The testbed's tools live in sbin, which a non-login root shell may not have on PATH.
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

had_etcd=$(command -v etcd || true)
pairs=(etcd:etcd-server etcdctl:etcd-client)
if [ "${1:-}" = "--tests" ]; then
  pairs+=(zsh:zsh)
  [ "$(id -u)" -eq 0 ] && pairs+=(iptables:iptables conntrack:conntrack faketime:faketime)
fi
bash "$here/ensure-packages.sh" "${pairs[@]}"
# Debian starts an etcd service on install; the project runs its own etcd processes.
if [ -z "$had_etcd" ] && command -v systemctl >/dev/null 2>&1; then
  systemctl disable --now etcd >/dev/null 2>&1 || sudo -n systemctl disable --now etcd >/dev/null 2>&1 || true
fi
