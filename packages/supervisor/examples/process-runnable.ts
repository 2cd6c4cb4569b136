/**
 * A child process as a supervised runnable: healthy once it prints its ready
 * line, its output in the runnable's log, restarted with backoff whenever it
 * exits, SIGTERM (then SIGKILL) when the tree stops.
 */
import { supervise } from "@metropolis/supervisor";
import { commandRunnable, ProcessExitedError } from "@metropolis/supervisor/process";

const server = commandRunnable(
  process.execPath,
  ["-e", 'console.log("listening"); setTimeout(() => process.exit(3), 1000);'],
  {
    ready: /listening/,
    graceMs: 2000,
    logLine: (line, stream, logger) => logger.info(line, { stream }),
  },
);

const sup = supervise(async (ctx) => {
  ctx.run("server", server, { backoff: { initialMs: 100 } });
  ctx.healthy();
  await ctx.untilAborted();
});
sup.onTransition((t) => {
  if (t.error instanceof ProcessExitedError) console.log(`${t.dn} exited with ${t.error.code}`);
});
setTimeout(() => void sup.stop(), 2500).unref();
