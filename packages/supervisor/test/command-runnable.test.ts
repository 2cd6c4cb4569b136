import type { ChildProcess } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  commandRunnable,
  CommandStartError,
  ProcessExitedError,
  processExitOutputLineChars,
} from "@metropolis/supervisor/process";
import { eventually, testHarness, type TestHarness } from "@metropolis/supervisor/testing";
import { serve } from "./helpers";

let h: TestHarness | undefined;
const children: ChildProcess[] = [];
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
  // Belt and braces: whatever the test did, no process it started survives it.
  for (const c of children.splice(0))
    if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
});

/** A node process running `script`, as a runnable under root.proc. */
const nodeScript = (script: string, opts: Parameters<typeof commandRunnable>[2] = {}) =>
  commandRunnable(process.execPath, ["-e", script], { ...opts, onSpawn: (c) => children.push(c) });

const underRoot =
  (r: ReturnType<typeof commandRunnable>) =>
  async (ctx: Parameters<typeof r>[0]): Promise<void> => {
    ctx.run("proc", r);
    await serve(ctx);
  };

const pidOf = (h: TestHarness) => {
  const started = h.supervisor.logs("root.proc").find((l) => l.message.startsWith("started"));
  return Number(/pid (\d+)/.exec(started!.message)![1]);
};

describe("commandRunnable", () => {
  it("is healthy once a ready line appears, and pipes output lines to its DN", async () => {
    h = testHarness(
      underRoot(
        nodeScript(
          `console.log("booting"); console.error("a warning"); console.log("READY on 1234"); setInterval(() => {}, 1000);`,
          { ready: /^READY/ },
        ),
      ),
    );
    await h.waitFor("root.proc", "healthy");
    const lines = () => h!.supervisor.logs("root.proc").map((l) => `${l.level} ${l.message}`);
    expect(lines()).toEqual(expect.arrayContaining(["info booting", "info READY on 1234"]));
    // One pipe keeps its order; stdout and stderr are two pipes, read as they come.
    expect(lines().indexOf("info READY on 1234")).toBeGreaterThan(lines().indexOf("info booting"));
    await eventually(
      () => lines().includes("warn a warning"),
      "the stderr line logged as a warning",
    );
  });

  it("is healthy once started when no readiness is given", async () => {
    h = testHarness(underRoot(nodeScript(`setInterval(() => {}, 1000);`)));
    await h.waitFor("root.proc", "healthy");
  });

  it("is healthy once the probe succeeds", async () => {
    const dir = await mkdtemp(join(tmpdir(), "cmd-probe-"));
    const flag = join(dir, "ready");
    try {
      const { access } = await import("node:fs/promises");
      h = testHarness(
        underRoot(
          nodeScript(
            `setTimeout(() => require("fs").writeFileSync(${JSON.stringify(flag)}, ""), 100); setInterval(() => {}, 1000);`,
            {
              probe: () => access(flag).then(() => true),
              probeIntervalMs: 10,
            },
          ),
        ),
      );
      const healthy = h.nextTransition((t) => t.dn === "root.proc" && t.to === "healthy");
      await healthy;
      await expect(access(flag)).resolves.toBeUndefined();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("stops probing a process that exited: a runnable that runs its command again is healthy once", async () => {
    const dir = await mkdtemp(join(tmpdir(), "cmd-again-"));
    const flag = join(dir, "ready");
    try {
      const { access } = await import("node:fs/promises");
      // Exits at once the first time, then serves: the probe succeeds only for the second.
      let runs = 0;
      const command = nodeScript(
        `const fs = require("fs"); if (!fs.existsSync(${JSON.stringify(join(dir, "ran"))})) { fs.writeFileSync(${JSON.stringify(join(dir, "ran"))}, ""); process.exit(1); }` +
          `fs.writeFileSync(${JSON.stringify(flag)}, ""); setInterval(() => {}, 1000);`,
        { probe: () => access(flag).then(() => true), probeIntervalMs: 5 },
      );
      h = testHarness(
        underRoot(async (ctx) => {
          for (;;) {
            runs++;
            try {
              return await command(ctx);
            } catch (e) {
              if (runs > 1) throw e;
            }
          }
        }),
      );
      await h.waitFor("root.proc", "healthy");
      expect(runs).toBe(2);
      // The first process's probe, still polling, would mark it healthy a second time
      // within a probe interval: healthy() is legal once, so the runnable would die.
      await expect(
        h.nextTransition((t) => t.dn === "root.proc" && t.to === "dead", { timeoutMs: 200 }),
      ).rejects.toThrow();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("fails when the process exits, whatever its code, and is restarted", async () => {
    const dir = await mkdtemp(join(tmpdir(), "cmd-exit-"));
    const counter = join(dir, "runs");
    await writeFile(counter, "");
    try {
      h = testHarness(
        underRoot(
          nodeScript(
            `const fs = require("fs"); fs.appendFileSync(${JSON.stringify(counter)}, "x");` +
              `if (fs.readFileSync(${JSON.stringify(counter)}, "utf8").length === 1) process.exit(0);` +
              `setInterval(() => {}, 1000);`,
          ),
        ),
        { expectDeath: (dn) => dn === "root.proc" },
      );
      const death = await h.nextTransition((t) => t.dn === "root.proc" && t.to === "dead");
      expect(death.error).toBeInstanceOf(ProcessExitedError);
      expect(death.error?.message).toBe(`root.proc: ${process.execPath} exited with code 0`);
      await h.nextTransition((t) => t.dn === "root.proc" && t.to === "healthy");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("fails when the process is killed from outside", async () => {
    h = testHarness(underRoot(nodeScript(`setInterval(() => {}, 1000);`)), {
      expectDeath: (dn) => dn === "root.proc",
    });
    await h.waitFor("root.proc", "healthy");
    const death = h.nextTransition((t) => t.dn === "root.proc" && t.to === "dead");
    process.kill(pidOf(h), "SIGKILL");
    expect((await death).error?.message).toMatch(/exited on signal SIGKILL$/);
  });

  it("says in its failure what the process last said, bounded", async () => {
    const long = "x".repeat(processExitOutputLineChars + 50);
    h = testHarness(
      underRoot(
        nodeScript(
          // One stream: the order of lines across stdout and stderr is the reader's.
          `console.error("one"); console.error("two"); console.error("three");` +
            `console.error(${JSON.stringify(long)}); console.error("fatal: no quorum");` +
            `setTimeout(() => process.exit(1), 10);`,
        ),
      ),
      { expectDeath: (dn) => dn === "root.proc" },
    );
    const death = await h.nextTransition((t) => t.dn === "root.proc" && t.to === "dead");
    if (!(death.error instanceof ProcessExitedError)) throw new Error(String(death.error));
    expect(death.error.code).toBe(1);
    // The last three lines, the long one cut; what came before them is not kept.
    const cut = `${"x".repeat(processExitOutputLineChars)}…`;
    expect(death.error.lastOutput).toEqual(["three", cut, "fatal: no quorum"]);
    expect(death.error.message).toBe(
      `root.proc: ${process.execPath} exited with code 1; its last output: three | ${cut} | fatal: no quorum`,
    );
  });

  it("fails clearly when the binary does not exist", async () => {
    h = testHarness(underRoot(commandRunnable("/nonexistent/etcd", [])), {
      expectDeath: (dn) => dn === "root.proc",
    });
    const death = await h.nextTransition((t) => t.dn === "root.proc" && t.to === "dead");
    expect(death.error).toBeInstanceOf(CommandStartError);
    expect(death.error?.message).toMatch(
      /^root\.proc: cannot start \/nonexistent\/etcd: spawn \/nonexistent\/etcd ENOENT/,
    );
  });

  it("sends SIGTERM on abort, and SIGKILL after the grace period to a process that ignores it", async () => {
    h = testHarness(
      underRoot(
        nodeScript(
          `process.on("SIGTERM", () => console.log("got SIGTERM, ignoring")); console.log("up"); setInterval(() => {}, 1000);`,
          {
            ready: /^up$/,
            graceMs: 100,
          },
        ),
      ),
    );
    await h.waitFor("root.proc", "healthy");
    const pid = pidOf(h);
    const report = await h.supervisor.stop({ timeoutMs: 5000 });
    expect(report.clean).toBe(true);
    const messages = h.supervisor.logs("root.proc").map((l) => l.message);
    expect(messages).toContain("got SIGTERM, ignoring");
    expect(messages).toContain("still running 100 ms after SIGTERM; sending SIGKILL");
    expect(() => process.kill(pid, 0)).toThrow(/ESRCH/);
    expect(h.supervisor.tree().find((n) => n.dn === "root.proc")?.state).toBe("canceled");
  });
});
