/**
 * Testbed, with real namespaces, veths and a bridge: what `create` builds
 * (addresses, names, `lo` up), that testbeds made at once never collide,
 * that a process runs on a host with only its network namespace switched
 * and keeps its PID (a NodeProcess too: its `pid` is the node's), that
 * `destroy()` leaves nothing, and that what an owner killed with SIGKILL
 * left behind — processes in its namespaces included — is removed by the
 * next `create`. Also what a machine that cannot run one is told.
 *
 * The testbed tests need root and ip, iptables, conntrack and nsenter;
 * elsewhere they are skipped with the reason in the suite's name.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { chmodSync, readlinkSync, statSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { eventually } from "@metropolis/supervisor/testing";
import { NodeProcess } from "../src/node-process";
import { Testbed, TestbedBusyError, TestbedError } from "../src/testbed";
import { testbedSuite } from "../src/testing";
import { linkNames, namespaceNames, SlotLock } from "../src/testbed-slot";

jest.setTimeout(60_000);

const suite = testbedSuite("Testbed (real namespaces)");

const register = join(__dirname, "swc-register.js");
const here = (...parts: string[]) => join(__dirname, ...parts);

/** The kernel objects of testbed `tag` that exist now. */
async function objectsOf(tag: string): Promise<string[]> {
  const mine = (name: string) =>
    name.startsWith(tag) && /^(br|h\d+|v\d+)$/.test(name.slice(tag.length));
  return [...(await namespaceNames()), ...(await linkNames())].filter(mine).sort();
}

/** The network namespace of process `pid`, as `net:[inode]`. */
const netnsOf = (pid: number | "self") => readlinkSync(`/proc/${pid}/ns/net`);
const mntnsOf = (pid: number | "self") => readlinkSync(`/proc/${pid}/ns/mnt`);

/** Waits for the first line of `child`'s stdout. */
function firstLine(child: ChildProcess): Promise<string> {
  const { stdout } = child;
  if (!stdout) return Promise.reject(new Error("no stdout"));
  return new Promise((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`exited (${code}) before writing a line`)));
    createInterface({ input: stdout }).once("line", resolve);
  });
}

/** Whether process `pid` still runs (not a zombie). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  const stat = spawnSync("cat", [`/proc/${pid}/stat`], { encoding: "utf8" }).stdout;
  return !/\) [ZX] /.test(stat);
}

(suite.runs ? describe : describe.skip)(suite.title, () => {
  const children: ChildProcess[] = [];
  const testbeds: Testbed[] = [];

  afterAll(async () => {
    for (const child of children) {
      if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) {
        try {
          process.kill(child.pid, "SIGKILL");
        } catch {
          // gone
        }
      }
    }
    await Promise.all(testbeds.map((t) => t.destroy()));
  });

  it("builds a bridge with the owner's address and n namespaces, each with lo and eth0 up at its address", async () => {
    const testbed = await Testbed.create({ hosts: 3 });
    testbeds.push(testbed);
    expect(testbed.subnet).toMatch(/^198\.1[89]\.\d{1,3}\.0\/24$/);
    const prefix = testbed.subnet.replace(".0/24", "");
    expect(testbed.ownerAddress).toBe(`${prefix}.1`);
    expect([1, 2, 3].map((h) => testbed.address(h))).toEqual(
      [2, 3, 4].map((i) => `${prefix}.${i}`),
    );
    expect(testbed.hostOf(`${prefix}.3`)).toBe(2);
    expect(() => testbed.address(4)).toThrow(TestbedError);

    const objects = await objectsOf(testbed.tag);
    expect(objects).toEqual(
      [
        testbed.bridge,
        ...[1, 2, 3].flatMap((h) => [testbed.namespace(h), `${testbed.tag}v${h}`]),
      ].sort(),
    );
    for (const name of objects) expect(name.length).toBeLessThanOrEqual(15);

    const bridge = spawnSync("ip", ["-4", "-o", "addr", "show", "dev", testbed.bridge], {
      encoding: "utf8",
    });
    expect(bridge.stdout).toContain(`inet ${testbed.ownerAddress}/24`);
    for (const host of [1, 2, 3]) {
      const { stdout } = await testbed.exec(host, "ip", ["-o", "addr", "show"]);
      expect(stdout).toContain("lo    inet 127.0.0.1/8");
      expect(stdout).toContain(`eth0    inet ${testbed.address(host)}/24`);
      const links = await testbed.exec(host, "ip", ["-o", "link", "show", "up"]);
      expect(links.stdout).toMatch(/: lo: .*UP/);
      expect(links.stdout).toMatch(/: eth0@\S+: .*UP/);
    }
    // The host's network namespace has none of its hosts' addresses: they are elsewhere.
    const hostAddrs = spawnSync("ip", ["-4", "-o", "addr"], { encoding: "utf8" }).stdout;
    expect(hostAddrs).not.toContain(`${testbed.address(1)}/`);

    // A host added later is built the same way.
    expect(await testbed.addHost()).toBe(4);
    const { stdout } = await testbed.exec(4, "ip", ["-o", "addr", "show", "dev", "eth0"]);
    expect(stdout).toContain(`inet ${prefix}.5/24`);
  });

  it("gives testbeds made at the same time different names and subnets", async () => {
    const made = await Promise.all([1, 2, 3, 4].map(() => Testbed.create({ hosts: 2 })));
    testbeds.push(...made);
    expect(new Set(made.map((t) => t.tag)).size).toBe(4);
    expect(new Set(made.map((t) => t.subnet)).size).toBe(4);
    for (const t of made) expect(await objectsOf(t.tag)).toHaveLength(5);
    // A subnet in use is refused, not shared.
    await expect(Testbed.create({ hosts: 1, subnet: made[0].subnet })).rejects.toThrow(
      TestbedBusyError,
    );
    await expect(Testbed.create({ hosts: 1, subnet: "10.0.0.0/24" })).rejects.toThrow(TestbedError);
  });

  it("runs a process on a host with only its network namespace switched, under the command's own PID", async () => {
    const testbed = await Testbed.create({ hosts: 2 });
    testbeds.push(testbed);
    const child = testbed.spawn(
      2,
      process.execPath,
      ["-e", "console.log(process.pid); setInterval(() => {}, 1000)"],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    children.push(child);
    const pid = Number(await firstLine(child));
    expect(pid).toBe(child.pid);
    expect(netnsOf(pid)).toBe(`net:[${statSync(testbed.namespacePath(2)).ino}]`);
    expect(netnsOf(pid)).not.toBe(netnsOf("self"));
    // The mount namespace is the test's: a node's tmpfs and unix sockets are the host's.
    expect(mntnsOf(pid)).toBe(mntnsOf("self"));
    expect(await testbed.processes(2)).toEqual([pid]);
    expect(await testbed.processes(1)).toEqual([]);
  });

  it("spawns a NodeProcess in a namespace: its pid is the node's, and stop() still works", async () => {
    const testbed = await Testbed.create({ hosts: 1 });
    testbeds.push(testbed);
    const dir = await mkdtemp(join(tmpdir(), "testbed-node-"));
    try {
      // A stand-in for metropolis-node: says its PID and address, exits on SIGTERM.
      const binary = join(dir, "fake-node.js");
      await writeFile(
        binary,
        `const i = process.argv.indexOf("--address");
         const address = process.argv[i + 1];
         require("node:net").createServer().listen(7835, address, () =>
           console.log(JSON.stringify({ dn: "", level: "info", message: "up", meta: { pid: process.pid, address } })));
         process.on("SIGTERM", () => process.exit(0));`,
      );
      const proc = NodeProcess.start({
        name: "node1",
        root: join(dir, "root"),
        address: testbed.address(1),
        binary,
        netns: testbed.namespace(1),
      });
      const line = await proc.waitForLog((l) => l.message === "up", 10_000);
      expect(line.meta).toEqual({ pid: proc.pid, address: testbed.address(1) });
      expect(proc.netns).toBe(testbed.namespace(1));
      expect(netnsOf(proc.pid)).toBe(`net:[${statSync(testbed.namespacePath(1)).ino}]`);
      // Its own process group, as on loopback.
      const stat = spawnSync("cat", [`/proc/${proc.pid}/stat`], { encoding: "utf8" }).stdout;
      expect(Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[2])).toBe(proc.pid);
      expect(await proc.stop()).toEqual({ code: 0, signal: null });
      expect(proc.leftovers).toBe(false);
      expect(await testbed.processes(1)).toEqual([]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("destroy() removes every namespace, veth and the bridge, killing what still ran there", async () => {
    const testbed = await Testbed.create({ hosts: 3 });
    testbeds.push(testbed);
    const child = testbed.spawn(3, process.execPath, ["-e", "setInterval(() => {}, 1000)"], {
      stdio: "ignore",
    });
    children.push(child);
    const pid = child.pid;
    if (pid === undefined) throw new Error("no pid");
    await eventually(
      async () => (await testbed.processes(3)).includes(pid),
      "the process on host3",
    );
    expect(await testbed.destroy()).toEqual([pid]);
    expect(testbed.destroyed).toBe(true);
    expect(await objectsOf(testbed.tag)).toEqual([]);
    await eventually(() => !alive(pid), "the process killed");
    // Twice is fine.
    expect(await testbed.destroy()).toEqual([pid]);
  });

  it("removes, at the next create, what an owner killed with SIGKILL left behind", async () => {
    // A real owner process: builds a testbed, starts a process on host 1, says its tag, waits.
    const owner = spawn(process.execPath, ["-r", register, here("testbed-owner.fixture.ts")], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    children.push(owner);
    const ownerPid = owner.pid;
    if (ownerPid === undefined) throw new Error("no pid");
    const said: unknown = JSON.parse(await firstLine(owner));
    if (typeof said !== "object" || said === null) throw new Error(`owner said ${String(said)}`);
    const tag = String(Reflect.get(said, "tag"));
    const orphan = Number(Reflect.get(said, "pid"));
    expect(await objectsOf(tag)).toHaveLength(5);

    process.kill(ownerPid, "SIGKILL");
    await eventually(() => owner.signalCode === "SIGKILL", "the owner dead");
    // Its slot is free the moment it died. Held here for a moment (so that another test file's
    // create, in a parallel worker, cannot remove them meanwhile), its left-overs are all there:
    // namespaces, veths, bridge, and the process on host 1.
    const slot = Number(tag.slice("mtb".length));
    const held = await SlotLock.take(slot);
    if (held) {
      try {
        expect(await objectsOf(tag)).toHaveLength(5);
        expect(alive(orphan)).toBe(true);
      } finally {
        await held.release();
      }
    }

    const next = await Testbed.create({ hosts: 1 });
    testbeds.push(next);
    expect(await objectsOf(tag)).toEqual([]);
    await eventually(() => !alive(orphan), "the orphan on the dead testbed's host killed");
    // A slot whose owner lives is never touched: the others made here are all still there.
    for (const t of testbeds.filter((t) => !t.destroyed)) {
      expect(await objectsOf(t.tag)).not.toEqual([]);
    }
  });
});

const root = process.getuid?.() === 0;

describe("Testbed without root", () => {
  /**
   * User nobody must reach this repository's files to run them: a checkout
   * in a private directory (`mktemp -d` makes one 0700) is not. Directories
   * above the repository that others may not enter are opened to them
   * (o+x) for these tests and closed again after.
   */
  const opened: { dir: string; mode: number }[] = [];
  beforeAll(() => {
    if (!root) return;
    for (let dir = here("..", ".."); ; dir = dirname(dir)) {
      const mode = statSync(dir).mode & 0o7777;
      if ((mode & 0o001) === 0) {
        chmodSync(dir, mode | 0o005);
        opened.push({ dir, mode });
      }
      if (dirname(dir) === dir) break;
    }
  });
  afterAll(() => {
    for (const { dir, mode } of opened.splice(0)) chmodSync(dir, mode);
  });

  /** Runs node with `args` (TypeScript of this repository) as user nobody when root, else as is. */
  function unprivileged(args: string[]): { status: number | null; stdout: string; stderr: string } {
    const result = spawnSync(process.execPath, ["-r", register, ...args], {
      encoding: "utf8",
      ...(root ? { uid: 65534, gid: 65534 } : {}),
      cwd: tmpdir(),
      timeout: 30_000,
    });
    return { status: result.status, stdout: result.stdout, stderr: result.stderr };
  }
  const reason = "network namespaces, veths and iptables need root: run it as root";

  it("is unavailable, saying why in one line", () => {
    const testbed = JSON.stringify(here("..", "src", "testbed.ts"));
    const check = unprivileged([
      "-e",
      `console.log(JSON.stringify(require(${testbed}).Testbed.available()))`,
    ]);
    expect(check.stderr).toBe("");
    expect(JSON.parse(check.stdout)).toEqual({ ok: false, reason });
  });

  it("makes `npm start -- --hosts` print that one line and exit 1", () => {
    const launcher = unprivileged([here("..", "src", "main.ts"), "--hosts"]);
    expect(launcher.stdout).toBe("");
    expect(launcher.stderr).toBe(`local-cluster: --hosts cannot run here: ${reason}\n`);
    expect(launcher.status).toBe(1);
  });
});
