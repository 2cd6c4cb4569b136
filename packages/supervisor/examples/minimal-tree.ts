/**
 * A minimal supervision tree: a root with two children, one of which fails
 * now and then and is restarted with backoff while the other keeps running.
 * Runs for three seconds (or until Ctrl-C), then stops the tree.
 */
import { supervise, type RunContext } from "@metropolis/supervisor";
import { ticker } from "./ticker";

async function flaky(ctx: RunContext): Promise<void> {
  ctx.healthy();
  await ctx.sleep(700);
  throw new Error("failed on purpose");
}

const sup = supervise(
  async (ctx) => {
    ctx.run("ticker", ticker(500));
    ctx.run("flaky", flaky, { backoff: { initialMs: 200 } });
    ctx.healthy();
    await ctx.untilAborted();
  },
  { logger: console }, // any Logger: winston (the default), console, an adapter for pino…
);

const stop = async () => {
  const report = await sup.stop({ timeoutMs: 5000 });
  console.log(report.clean ? "stopped cleanly" : `still running: ${report.laggards.join(", ")}`);
  for (const node of sup.tree())
    console.log(`${node.dn}: ${node.state}, ${node.restarts} restarts`);
};
process.once("SIGINT", () => void stop());
setTimeout(() => void stop(), 3000).unref();
