#!/usr/bin/env bash
# Pack-and-consume test of @metropolis/supervisor: proves the published
# package works for someone outside this workspace.
#
# It builds, `npm pack`s packages/supervisor, and in a fresh project outside
# the workspace installs the tarball with only its declared dependencies (plus
# typescript, @types/node and the optional peers the subpath examples need),
# then:
#   1. runs a CommonJS example (require of the main entry and ./testing),
#   2. runs an ES module example (import of the main entry and ./xstate),
#   3. type-checks a TypeScript consumer and packages/supervisor/examples
#      against the packed types (moduleResolution node16 and nodenext),
#   4. compiles the examples and runs their unit test (node --test) and the
#      minimal tree.
# Any failure fails the script; its temporary directories are always removed.
# Needs npm registry access (or a warm npm cache).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
started=$SECONDS
work="$(mktemp -d "${TMPDIR:-/tmp}/pack-consume.XXXXXX")"
trap 'rm -rf "$work"' EXIT

step() { printf '\n== pack-consume: %s (%ss)\n' "$*" "$((SECONDS - started))"; }
fail() {
  printf '\npack-consume FAILED: %s\n' "$*" >&2
  exit 1
}

step "build and pack packages/supervisor"
(cd "$root" && npx tsc -b packages/supervisor)
tarball="$(cd "$root/packages/supervisor" && npm pack --silent --pack-destination "$work" | tail -n 1)"
[[ -f "$work/$tarball" ]] || fail "npm pack did not produce a tarball"
listing="$(tar -tzf "$work/$tarball")"
for f in package/package.json package/README.md package/LICENSE package/dist/index.js \
  package/dist/index.d.ts package/dist/testing.d.ts package/dist/xstate.d.ts \
  package/src/index.ts; do
  grep -qx "$f" <<<"$listing" || fail "$f is missing from $tarball"
done
if grep -q '^package/test/\|tsbuildinfo' <<<"$listing"; then fail "$tarball ships tests or build info"; fi

consumer="$work/consumer"
mkdir -p "$consumer"
cd "$consumer"
cat >package.json <<'EOF'
{ "name": "pack-consume-consumer", "version": "0.0.0", "private": true }
EOF

step "install the tarball alone (its declared dependencies only)"
npm install --prefer-offline --no-audit --no-fund --loglevel=error "$work/$tarball"
for heavy in xstate prom-client @grpc/grpc-js; do
  [[ ! -e "node_modules/$heavy" ]] || fail "$heavy was installed although it is an optional peer"
done

step "CommonJS: require the main entry and ./testing"
cat >cjs.cjs <<'EOF'
const assert = require("node:assert/strict");
const sup = require("@metropolis/supervisor");
const { startOnMock, eventually } = require("@metropolis/supervisor/testing");
for (const name of ["supervise", "defaultBackoff", "abortableSleep", "SupervisorError"]) {
  assert.ok(sup[name], `main entry lacks ${name}`);
}
// Everything loaded comes from this project's own node_modules: a
// node_modules in an ancestor directory (Node's resolution walks up to /)
// could otherwise supply a dependency the package forgot to declare.
const outside = Object.keys(require.cache).filter((f) => !f.startsWith(__dirname + "/"));
assert.deepEqual(outside, [], "modules loaded from outside the consumer project");
// The main entry loads none of the optional peers.
const heavy = Object.keys(require.cache).filter((f) => /node_modules\/(xstate|prom-client|@grpc)\//.test(f));
assert.deepEqual(heavy, [], "the main entry loaded an optional peer");
(async () => {
  const run = startOnMock("root.worker", async (ctx) => {
    ctx.healthy();
    await ctx.untilAborted();
  });
  await eventually(() => run.ctx.healthyCalls === 1, "healthy");
  await run.stop();
  const tree = sup.supervise(async (ctx) => {
    ctx.logger.info("hello from a tree", { from: "cjs" });
    ctx.healthy();
    await ctx.untilAborted();
  }, { logger: { error() {}, warn() {}, info() {}, debug() {} } });
  await eventually(() => tree.tree()[0]?.state === "healthy", "root healthy");
  assert.equal(tree.logs("root")[0].message, "hello from a tree");
  assert.deepEqual((await tree.stop()).clean, true);
  console.log("cjs ok");
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
EOF
node cjs.cjs

step "install the optional peers the subpath examples need"
npm install --prefer-offline --no-audit --no-fund --loglevel=error \
  xstate@^5 @grpc/grpc-js@^1 typescript@~5.9 @types/node@^20

step "the main entry loads none of the optional peers, though they are installed"
node -e '
  require("@metropolis/supervisor");
  const heavy = Object.keys(require.cache).filter((f) => /node_modules\/(xstate|prom-client|@grpc)\//.test(f));
  if (heavy.length > 0) throw new Error("the main entry loaded " + heavy.join(", "));
  require("@metropolis/supervisor/xstate");
  if (!Object.keys(require.cache).some((f) => f.includes("/node_modules/xstate/"))) throw new Error("./xstate did not load xstate");
  console.log("main entry light");
'

step "ES module: import the main entry and ./xstate (named exports of CommonJS)"
cat >esm.mjs <<'EOF'
import assert from "node:assert/strict";
import { supervise } from "@metropolis/supervisor";
import { machineRunnable } from "@metropolis/supervisor/xstate";
import { eventually } from "@metropolis/supervisor/testing";
import { setup } from "xstate";

const machine = setup({}).createMachine({
  initial: "serving",
  states: { serving: { tags: ["healthy"], after: { 20: "finished" } }, finished: { type: "final" } },
});
const sup = supervise(async (ctx) => {
  ctx.run("machine", machineRunnable(machine), { restart: "transient" });
  ctx.healthy();
  await ctx.untilAborted();
}, { logger: console });
await eventually(() => sup.tree().find((n) => n.dn === "root.machine")?.state === "done", "machine done");
assert.equal((await sup.stop()).clean, true);
console.log("esm ok");
EOF
node esm.mjs

step "TypeScript: type-check a consumer and the examples against the packed types"
mkdir -p src
cp "$root"/packages/supervisor/examples/*.ts src/
cat >src/consumer.ts <<'EOF'
import { supervise, type Logger, type RunContext, type SupervisorOptions } from "@metropolis/supervisor";
import { PrometheusSupervisorMetrics } from "@metropolis/supervisor/prometheus";
import { grpcServerRunnable } from "@metropolis/supervisor/grpc";
import { commandRunnable } from "@metropolis/supervisor/process";
import { machineRunnable } from "@metropolis/supervisor/xstate";
import { MockContext, testHarness } from "@metropolis/supervisor/testing";

const logger: Logger = console;
const opts: SupervisorOptions = { logger, logLevelEnv: "MY_LOG_LEVEL", logBufferLines: 10 };
export const uses = [supervise, PrometheusSupervisorMetrics, grpcServerRunnable, commandRunnable, machineRunnable, MockContext, testHarness, opts];
export async function child(ctx: RunContext): Promise<void> {
  ctx.logger.info("typed", { dn: ctx.dn });
  ctx.healthy();
  await ctx.untilAborted();
}
// @ts-expect-error the names are checked: a number is not a runnable
supervise(42);
EOF
# prom-client's types are needed for ./prometheus: install it for the type check.
npm install --prefer-offline --no-audit --no-fund --loglevel=error prom-client@^15
for mode in node16 nodenext; do
  cat >tsconfig.json <<EOF
{
  "compilerOptions": {
    "target": "ES2022", "lib": ["ES2023"], "module": "$mode", "moduleResolution": "$mode",
    "strict": true, "types": ["node"], "outDir": "out", "rootDir": "src"
  },
  "include": ["src"]
}
EOF
  # The last mode also emits, for the run below.
  emit=(--noEmit)
  [[ $mode == nodenext ]] && emit=()
  npx tsc "${emit[@]}" -p tsconfig.json || fail "the consumer does not type-check with moduleResolution $mode"
  echo "types ok ($mode)"
done

step "run the examples' unit test and the minimal tree"
node --test out/ticker.test.js
node out/minimal-tree.js >minimal-tree.log || fail "minimal-tree failed: $(cat minimal-tree.log)"
grep -q "stopped cleanly" minimal-tree.log || fail "minimal-tree did not stop cleanly: $(cat minimal-tree.log)"

step "passed in $((SECONDS - started)) s"
