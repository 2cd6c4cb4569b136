#!/usr/bin/env bash
# Fails when the committed generated code (src/gen) is not exactly what
# `buf generate` makes from the .proto files (schema/) with buf.gen.yaml, or
# when the .proto files fail `buf lint`. Run by `npm test`.
#
# It works on the package directory it lives in (scripts/..), with the buf
# and ts-proto of ../node_modules, so a copy of the package next to a
# node_modules (as the tests make) can be checked too. Nothing is written to
# the package: the code is regenerated into a temporary directory.
set -euo pipefail
cd "$(dirname "$0")/.."

buf=../node_modules/.bin/buf
if [[ ! -x $buf ]]; then
  echo "check-generated: $buf not found; run npm install" >&2
  exit 2
fi

if ! "$buf" lint; then
  echo "check-generated: buf lint failed on proto/schema (see above)" >&2
  exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# --output moves the plugin's `out: src/gen` under $tmp.
"$buf" generate --output "$tmp"

if ! diff -r src/gen "$tmp/src/gen" >"$tmp/diff"; then
  # A short excerpt points at what changed; regenerating shows it all.
  head -n 40 "$tmp/diff" >&2
  echo "generated code is stale: run npm run proto:generate" >&2
  exit 1
fi
echo "check-generated: proto/src/gen is up to date"
