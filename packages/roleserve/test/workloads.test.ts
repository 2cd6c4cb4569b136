/**
 * The workloads launcher: specs are validated up front; without the worker
 * role nothing runs; with it, real processes run as supervised children with
 * their own DNs and logs, and taking the role away stops them (the launcher
 * fails with RolesChangedError, the supervisor cancels its children).
 */
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { waitFor } from "@metropolis/event";
import type { common } from "@metropolis/proto";
import { readProgressEvent } from "@metropolis/supervisor/node-progress";
import { eventually, MockContext, testHarness } from "@metropolis/supervisor/testing";
import { InvalidWorkloadError, RolesChangedError } from "../src/errors";
import { RoleserveValues } from "../src/values";
import { workloadsWorker, type WorkloadSpec } from "../src/workloads";

const worker: common.NodeRoles = { kubernetesWorker: {} };
const none: common.NodeRoles = {};

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "roleserve-workloads-"));
});
afterAll(() => rm(tmp, { recursive: true, force: true }));

/** Whether process `pid` exists. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ESRCH") return false;
    throw e;
  }
}

/**
 * A node process that writes its PID and $GREETING to `pidFile`, says hello
 * on stdout, and runs until stopped.
 */
function sleeper(name: string, pidFile: string): WorkloadSpec {
  return {
    name,
    command: process.execPath,
    args: [
      "-e",
      `require("fs").writeFileSync(${JSON.stringify(pidFile)}, process.pid + " " + process.env.GREETING);` +
        `console.log("hello from ${name}"); setInterval(() => {}, 1000);`,
    ],
    env: { GREETING: `hi-${name}` },
  };
}

describe("workloadsWorker", () => {
  it("refuses invalid specs before anything runs", () => {
    const values = new RoleserveValues();
    const bad: [WorkloadSpec[], RegExp][] = [
      [[{ name: "", command: "sleep" }], /name is empty/],
      [[{ name: "Web Server", command: "sleep" }], /must match/],
      [[{ name: "a".repeat(65), command: "sleep" }], /must match/],
      [[{ name: "db", command: "" }], /command is empty/],
      [
        [
          { name: "db", command: "sleep" },
          { name: "db", command: "true" },
        ],
        /declared twice/,
      ],
    ];
    for (const [workloads, message] of bad) {
      expect(() => workloadsWorker(values, { workloads })).toThrow(InvalidWorkloadError);
      expect(() => workloadsWorker(values, { workloads })).toThrow(message);
    }
    // What the validation accepts, the supervisor accepts as a child name.
    const ok = [{ name: "web_1-a", command: "sleep" }];
    expect(() => workloadsWorker(values, { workloads: ok })).not.toThrow();
    const ctx = new MockContext();
    expect(() => ctx.run(ok[0].name, async () => undefined)).not.toThrow();
  });

  it("without the worker role runs nothing, and restarts when the role is given", async () => {
    const values = new RoleserveValues();
    const ctx = new MockContext("root.workloads");
    const result = workloadsWorker(values, {
      workloads: [{ name: "web", command: "sleep", args: ["60"] }],
    })(ctx);
    values.localRoles.set(none);
    expect(await waitFor(values.workloadStatus, () => true)).toEqual({
      running: false,
      workloads: [],
    });
    expect(ctx.state).toBe("healthy");
    expect(ctx.children).toEqual([]);
    // Another update that does not flip the flag changes nothing.
    values.localRoles.set({ kubernetesController: {} });
    values.localRoles.set(worker);
    const error = await result.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(RolesChangedError);
    expect((error as RolesChangedError).shouldRun).toBe(true);
  });

  it("runs the workloads as supervised processes while the node is a worker, and stops them when it is not", async () => {
    const values = new RoleserveValues();
    const files = { web: join(tmp, "web.pid"), db: join(tmp, "db.pid") };
    const harness = testHarness(
      workloadsWorker(values, {
        workloads: [sleeper("web", files.web), sleeper("db", files.db)],
      }),
      // The launcher fails on purpose when the role flips; its processes are
      // killed politely by the cancellation, so a long grace is never reached.
      { expectDeath: (dn) => dn === "root" },
    );
    const pids: number[] = [];
    try {
      values.localRoles.set(worker);
      await harness.waitFor("root", "healthy");
      for (const name of ["web", "db"] as const) {
        const content = await eventually(
          () => readFile(files[name], "utf8").catch(() => undefined),
          `${name} started`,
        );
        const [pid, greeting] = content.split(" ");
        expect(greeting).toBe(`hi-${name}`);
        expect(alive(Number(pid))).toBe(true);
        pids.push(Number(pid));
        await harness.waitFor(`root.${name}`, "healthy");
        // Each workload logs at its own DN.
        await eventually(
          () =>
            harness.supervisor.logs(`root.${name}`).some((l) => l.message === `hello from ${name}`),
          `${name}'s output in its log`,
        );
      }
      expect(await waitFor(values.workloadStatus, () => true)).toEqual({
        running: true,
        workloads: ["web", "db"],
      });

      const died = harness.nextTransition((t) => t.dn === "root" && t.to === "dead");
      values.localRoles.set(none);
      const death = await died;
      expect(death.error).toBeInstanceOf(RolesChangedError);
      for (const pid of pids) await eventually(() => !alive(pid), `process ${pid} gone`);
      // The restarted launcher sees no role and runs nothing.
      await waitFor(values.workloadStatus, (s) => !s.running, AbortSignal.timeout(10_000));
      await harness.waitFor("root", "healthy");
      expect(harness.supervisor.tree().map((n) => n.dn)).toEqual(["root"]);
      // Each run reported what it runs as a progress event.
      expect(
        harness.supervisor.logs("root").flatMap((l) => readProgressEvent(l.meta) ?? []),
      ).toEqual([
        { event: "workloads.changed", worker: true, workloads: ["web", "db"] },
        { event: "workloads.changed", worker: false, workloads: [] },
      ]);
    } finally {
      await harness.cleanup();
      for (const pid of pids) expect(alive(pid)).toBe(false);
    }
  });
});
