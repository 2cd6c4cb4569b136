/**
 * The launcher's state dir lock, with real processes standing in for a
 * launcher and for node process groups: a running launcher is refused, a
 * dead one's record is taken over, a reused PID is never signalled, and the
 * nodes a killed launcher left behind are stopped — gracefully, or killed
 * when they ignore SIGTERM.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { StateDirBusyError, StateDirLock } from "../src/state-dir-lock";

let dir: string;
const children: ChildProcess[] = [];
const quiet = () => undefined;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "state-dir-lock-"));
});

afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) {
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {
        child.kill("SIGKILL");
      }
    }
  }
  await rm(dir, { recursive: true, force: true });
});

/**
 * A process running `script` with `args`, in a process group of its own
 * like a node; resolves once the script has run (it says so), so that its
 * signal handlers are in place and its /proc entry is what a record names.
 */
async function start(script: string, args: string[] = []): Promise<ChildProcess> {
  const child = spawn(process.execPath, ["-e", `${script}; console.log("ready")`, "--", ...args], {
    detached: true,
    stdio: ["ignore", "pipe", "ignore"],
  });
  children.push(child);
  await new Promise<void>((resolve, reject) => {
    child.stdout.once("data", () => resolve());
    child.once("exit", () => reject(new Error("the process exited before it was ready")));
  });
  return child;
}

function cmdline(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8");
  } catch {
    return undefined;
  }
}

const exited = (child: ChildProcess) =>
  child.exitCode !== null || child.signalCode !== null
    ? Promise.resolve(child.signalCode)
    : new Promise<NodeJS.Signals | null>((resolve) =>
        child.once("exit", (_code, signal) => resolve(signal)),
      );

const idle = "setInterval(() => {}, 1000)";
const deaf = "process.on('SIGTERM', () => {}); setInterval(() => {}, 1000)";

describe("StateDirLock", () => {
  it("is taken by the first launcher, refused to a second while the first runs, and then free", async () => {
    const launcher = await start(idle);
    await writeFile(
      join(dir, "launcher.json"),
      JSON.stringify({ pid: launcher.pid, cmdline: cmdline(launcher.pid!) }),
    );
    const lock = new StateDirLock(dir, quiet);
    const refusal = lock.acquire();
    await expect(refusal).rejects.toBeInstanceOf(StateDirBusyError);
    await expect(refusal).rejects.toThrow(`another local cluster (pid ${launcher.pid}) is running`);

    launcher.kill("SIGKILL");
    await exited(launcher);
    await lock.acquire();
    const record = JSON.parse(await readFile(join(dir, "launcher.json"), "utf8"));
    expect(record.pid).toBe(process.pid);
    await lock.acquire(); // again from the same process: still ours

    lock.release();
    expect(await readdir(dir)).not.toContain("launcher.json");
  });

  it("takes over a record whose PID now runs another program", async () => {
    const stranger = await start(idle);
    await writeFile(
      join(dir, "launcher.json"),
      JSON.stringify({ pid: stranger.pid, cmdline: "node\0local-cluster/dist/main.js\0" }),
    );
    await new StateDirLock(dir, quiet).acquire();
    expect(stranger.exitCode).toBeNull();
    expect(stranger.signalCode).toBeNull();
  });

  it("stops the nodes a killed launcher left running, and leaves other processes alone", async () => {
    const root = join(dir, "nodes", "node1");
    const orphan = await start(idle, ["--root", root, "--address", "127.0.0.2"]);
    const deafOrphan = await start(deaf, ["--root", join(dir, "nodes", "node2"), "--x"]);
    const stranger = await start(idle, ["--root", "/elsewhere", "--x"]);
    const killed = new StateDirLock(dir, quiet, 500);
    await killed.acquire();
    killed.recordNode("node1", root, orphan.pid!);
    killed.recordNode("node2", join(dir, "nodes", "node2"), deafOrphan.pid!);
    // A record whose PID runs a node of another root (the PID was reused).
    killed.recordNode("node3", join(dir, "nodes", "node3"), stranger.pid!);
    // The launcher dies without releasing: its record names a process that is gone.
    await writeFile(join(dir, "launcher.json"), JSON.stringify({ pid: 2 ** 22 + 1, cmdline: "x" }));

    const messages: string[] = [];
    await new StateDirLock(dir, (m) => messages.push(m), 500).acquire();
    expect(await exited(orphan)).toBe("SIGTERM");
    expect(await exited(deafOrphan)).toBe("SIGKILL");
    expect(stranger.exitCode).toBeNull();
    expect(stranger.signalCode).toBeNull();
    expect(messages).toEqual(
      expect.arrayContaining([
        `node1 (pid ${orphan.pid}) still runs, left behind by a launcher that was killed: stopping it`,
        `node2 (pid ${deafOrphan.pid}) did not stop on SIGTERM: killing it`,
      ]),
    );
    expect(await readdir(join(dir, "pids"))).toEqual([]);
  });

  it("forgets a node's record once its process exited, but not a newer one", async () => {
    const lock = new StateDirLock(dir, quiet);
    await lock.acquire();
    lock.recordNode("node1", "/r", 101);
    lock.recordNode("node1", "/r", 102);
    lock.forgetNode("node1", 101);
    expect(await readdir(join(dir, "pids"))).toEqual(["node1.json"]);
    lock.forgetNode("node1", 102);
    expect(await readdir(join(dir, "pids"))).toEqual([]);
  });
});
