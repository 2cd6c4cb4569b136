/**
 * The demo behind `npm run demo`: a small node-shaped supervision tree that
 * runs for a few seconds. One of its runnables fails every couple of seconds;
 * watch the supervisor stop its group, restart it with backoff, and keep the
 * rest of the tree running. Then the tree is stopped gracefully.
 *
 *   root ─┬─ network                 (healthy, idle)
 *         └─ controlplane ─┬─ etcd    (a real child process, in a group with…)
 *                          └─ curator (…this one, which keeps failing)
 *
 * Usage: node demo/dist/main.js [--seconds N]   (Ctrl-C stops early)
 */
import { type NodeStatus, type RunContext, supervise } from "@metropolis/supervisor";
import { commandRunnable } from "@metropolis/supervisor/process";

function parseSeconds(argv: readonly string[]): number {
  const i = argv.indexOf("--seconds");
  if (i < 0) return 8;
  const n = Number(argv[i + 1]);
  if (!Number.isFinite(n) || n <= 0) {
    console.error(`--seconds needs a positive number, got ${JSON.stringify(argv[i + 1])}`);
    process.exit(2);
  }
  return n;
}

/** Stands in for etcd: a child process that prints a heartbeat line every 700 ms. */
const fakeEtcd = commandRunnable(
  process.execPath,
  ["-e", `console.log("etcd: serving"); setInterval(() => console.log("etcd: heartbeat"), 700);`],
  { ready: /serving/ },
);

/** A curator that loses its leadership every two seconds. */
async function flakyCurator(ctx: RunContext): Promise<void> {
  ctx.logger.info("curator: campaigning for leadership");
  await ctx.sleep(300);
  ctx.logger.info("curator: elected leader, serving");
  ctx.healthy();
  await ctx.sleep(2000);
  throw new Error("lost leadership: lease expired");
}

async function root(ctx: RunContext): Promise<void> {
  ctx.run("network", async (c) => {
    c.logger.info("network: address 127.0.0.1 configured");
    c.healthy();
    await c.untilAborted();
  });
  ctx.run("controlplane", async (c) => {
    c.runGroup({ etcd: fakeEtcd, curator: flakyCurator });
    c.healthy();
    await c.untilAborted();
  });
  ctx.healthy();
  await ctx.untilAborted();
}

function printTree(nodes: readonly NodeStatus[]): void {
  const rows = nodes.map((n) => {
    const depth = n.dn.split(".").length - 1;
    const name = `${"  ".repeat(depth)}${n.dn.split(".").at(-1)}`;
    const extra = n.nextRestartInMs !== undefined ? ` (restart in ${n.nextRestartInMs} ms)` : "";
    return `  ${name.padEnd(22)} ${n.state.padEnd(9)} restarts=${n.restarts}${extra}`;
  });
  console.log(["", "supervision tree:", ...rows, ""].join("\n"));
}

async function main(): Promise<void> {
  const seconds = parseSeconds(process.argv.slice(2));
  console.log(`Starting a supervision tree for ${seconds} s (Ctrl-C to stop early).`);
  const sup = supervise(root, { backoff: { initialMs: 300 } });
  const ticker = setInterval(() => printTree(sup.tree()), 2000);
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, seconds * 1000);
    process.once("SIGINT", () => (clearTimeout(timer), resolve()));
  });
  clearInterval(ticker);
  printTree(sup.tree());
  console.log("Stopping the tree…");
  const report = await sup.stop({ timeoutMs: 5000 });
  printTree(sup.tree());
  const restarts = sup.tree().find((n) => n.dn === "root.controlplane.curator")?.restarts ?? 0;
  console.log(
    report.clean
      ? `Stopped cleanly. The curator failed and was restarted ${restarts} times; everything else kept running.`
      : `Stopped, but these did not stop in time: ${report.laggards.join(", ")}`,
  );
  process.exitCode = report.clean ? 0 : 1;
}

void main();
