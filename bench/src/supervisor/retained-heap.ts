/**
 * (c) of the supervisor benchmark: heap retained per idle healthy runnable,
 * each waiting for its end on one path, measured in a process of its own.
 *
 * Why a process of its own: measured in the benchmark's process, the figure
 * moved between about 500 and 1,200 bytes (untilAborted) from one call to the
 * next, because a tree from an earlier measurement could still be held by a
 * stale slot of a suspended async function's frame when the "before" heap was
 * read (a heap snapshot showed a whole stopped tree of 10,001 nodes retained
 * from the stack), and be freed by the time of the "after" one. Here the heap
 * holds nothing of earlier work: a small tree is started and stopped first (so
 * that code and one-time structures exist before the baseline), then the
 * baseline is read, `count` runnables are started, and the heap is read again
 * once all of them are healthy and waiting.
 *
 *   node --expose-gc retained-heap.js <untilAborted|signal> <count>
 */
import { fork } from "node:child_process";
import { supervise, type RunContext, type Supervisor } from "@metropolis/supervisor";
import { untilEnd, type WaitPath } from "./wait-paths";

/** Starts `count` idle runnables waiting on `path`; resolves once all are healthy. */
async function idleTree(path: WaitPath, count: number): Promise<Supervisor> {
  const idle = async (ctx: RunContext) => {
    ctx.healthy();
    await untilEnd(ctx, path);
  };
  let healthy: () => void = () => undefined;
  const allHealthy = new Promise<void>((r) => (healthy = r));
  const sup = supervise(async (ctx) => {
    for (let i = 0; i < count; i++) ctx.run(`idle${i}`, idle);
    ctx.healthy();
    healthy();
    await ctx.untilAborted();
  });
  await allHealthy;
  // Let the last runnables reach their wait.
  await new Promise((r) => setImmediate(r));
  return sup;
}

async function measureHere(path: WaitPath, count: number): Promise<number> {
  const gc = global.gc;
  if (!gc) throw new Error("run with node --expose-gc");
  const warm = await idleTree(path, Math.min(count, 1000));
  await warm.stop();
  gc();
  const before = process.memoryUsage().heapUsed;
  const sup = await idleTree(path, count);
  gc();
  const after = process.memoryUsage().heapUsed;
  await sup.stop();
  return (after - before) / count;
}

/**
 * Bytes retained per idle runnable waiting on `path`, with `count` of them,
 * measured in a fresh Node process (see the module comment) that shares this
 * one's stdout (where the supervisor's default logger writes).
 */
export function retainedHeapPerRunnable(path: WaitPath, count: number): Promise<number> {
  const child = fork(__filename, [path, String(count)], {
    execArgv: ["--expose-gc"],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  return new Promise((resolve, reject) => {
    let result: number | undefined;
    child.on("message", (m: unknown) => {
      if (typeof m === "number") result = m;
    });
    child.on("error", reject);
    child.on("exit", (code) => {
      if (code === 0 && result !== undefined) resolve(result);
      else reject(new Error(`retained-heap child for ${path} × ${count} exited with ${code}`));
    });
  });
}

if (require.main === module) {
  const [path, count] = process.argv.slice(2);
  if ((path !== "untilAborted" && path !== "signal") || !(Number(count) > 0)) {
    process.stderr.write(
      "usage: node --expose-gc retained-heap.js <untilAborted|signal> <count>\n",
    );
    process.exit(2);
  }
  measureHere(path, Number(count)).then(
    (bytes) => {
      if (process.send) process.send(bytes, () => process.exit(0));
      else process.stderr.write(`${bytes.toFixed(0)} bytes per runnable\n`);
    },
    (e: unknown) => {
      process.stderr.write(`${String(e)}\n`);
      process.exit(1);
    },
  );
}
