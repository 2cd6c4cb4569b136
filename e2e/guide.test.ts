/**
 * e2e guide: the root README's "Running a cluster on several machines",
 * run as written on the multi-host testbed, so that the guide cannot rot.
 * Every block marked `<!-- guide: … -->` (guide-blocks.ts) runs in order,
 * through bash, with the real `metropolis-node` and `metroctl` (the
 * packages' bins symlinked onto PATH as the guide says, which run the
 * bundles `npm run build:bundles` builds; not METROPOLIS_NODE_BINARY's
 * build): operator blocks in
 * this process's network namespace (on the testbed's bridge), machine N's
 * blocks in host N's namespace (`nsenter --net`, as root). Machine N's node
 * is then started with exactly the `ExecStart` of the unit its
 * `install-service` wrote, in its namespace, and the guide's later blocks
 * drive the cluster it forms: ownership, registration, approval, roles,
 * health, a reboot (exit 75: started again) and a power-off (exit 0: left
 * stopped until `systemctl start`). The test then checks what the guide promises (three nodes UP and
 * HEALTHY at their addresses with their labels, three voting consensus
 * members, one failure survived), that each node ran sandboxed as its unit
 * says (read-only /, its root writable, ephemeral/ a tmpfs, no new
 * privileges, its file limit), and that `systemctl stop` (SIGTERM to the
 * node) stops each with exit 0 and nothing left behind.
 *
 * What stands in for what a real machine has (each defined below, in the
 * preludes):
 *
 * - addresses `10.0.0.N` → host N's address on the testbed; machine N's
 *   `/var/lib/…` and `/root/…` → the same paths under the test's directory
 *   for machine N (under /dev/shm: install-service refuses /tmp, which a
 *   service sees private);
 * - `scp FILE root@ADDR:PATH` → a copy into that machine's directory;
 * - `metropolis-node install-service …` → the real command, plus
 *   `--unit-dir` (the machine's `/etc/systemd/system`); the unit it wrote
 *   passes `systemd-analyze verify` (where installed);
 * - `systemctl daemon-reload` → nothing; `systemctl enable --now NAME` and
 *   `systemctl start NAME` → the test starts the unit's `ExecStart`,
 *   exactly, in the unit's sandbox as far as the node can tell
 *   (unit-sandbox.ts: a mount namespace of its own with `ProtectSystem=strict`,
 *   `ReadWritePaths=`, `PrivateTmp=`, `TemporaryFileSystem=`,
 *   `CacheDirectory=`, `LimitNOFILE=`, `UMask=`, `NoNewPrivileges=` applied
 *   from the unit), starts it again after an exit as the unit's `Restart=`,
 *   `RestartForceExitStatus=` and `RestartPreventExitStatus=` say (at once,
 *   not after `RestartSec=`), and stops it as systemd does (SIGTERM to its
 *   PID, SIGKILL to its group after `TimeoutStopSec`). The seccomp-based
 *   directives are not reproduced;
 * - the operator's `~/.config` → a directory of the test's (`HOME`,
 *   `XDG_CONFIG_HOME`); shell variables a block sets (`NODE1=…`) are kept for
 *   the blocks after it.
 *
 * Where the guide's prose says to wait for something before a block ("once
 * `metroctl approve` lists both"), the test polls for it with a deadline
 * (`preconditions`). It needs root, a testbed (ip, iptables, conntrack,
 * nsenter) and jq; elsewhere it is skipped with the reason in its name.
 * `METROPOLIS_E2E_KEEP=1` keeps its directory (the nodes' logs:
 * `machineN/node.log`).
 */
import { existsSync, readFileSync, readlinkSync, statSync } from "node:fs";
import { cp, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { connect } from "node:net";
import { basename, join, resolve } from "node:path";
import { defaultCuratorPort } from "@metropolis/curator";
import { eventually } from "@metropolis/supervisor/testing";
import { findTool } from "../local-cluster/src/host-command";
import { processGroupMembers } from "../local-cluster/src/node-process";
import { removeNodeRoot } from "../local-cluster/src/node-root-removal";
import { Testbed } from "../local-cluster/src/testbed";
import { testbedSuite } from "../local-cluster/src/testing";
import {
  describePlace,
  guideBlocks,
  substituteAddresses,
  type GuideBlock,
  type GuidePlace,
} from "./guide-blocks";
import {
  assignedNames,
  machinePaths,
  runBash,
  scpStandIn,
  shellQuote,
  type BashResult,
} from "./guide-shell";
import { EmulatedUnit, serviceDirectives, type UnitRun } from "./unit-sandbox";

jest.setTimeout(900_000);

const repo = resolve(__dirname, "..");
const readme = join(repo, "README.md");
/** The executables as the guide puts them on PATH: the packages' bins, which run their bundles. */
const nodeBin = join(repo, "packages", "node", "bin", "metropolis-node.js");
const metroctlBin = join(repo, "packages", "metroctl", "bin", "metroctl.js");
/** The bundle a bin runs (`npm run build:bundles`, which `npm install` and `npm test` run). */
const bundleOf = (bin: string) =>
  join(
    bin,
    "..",
    "..",
    "bundle",
    bin.endsWith("metroctl.js") ? "metroctl.js" : "metropolis-node.js",
  );

/** Where the blocks run, in the guide's order: a changed guide fails here first. */
const expectedPlaces = [
  "operator", // bootstrap parameters, scp
  "machine 1", // install-service, systemctl
  "operator", // takeownership, wait
  "operator", // register parameters, scp
  "machines 2 3", // install-service, systemctl
  "operator", // approve, wait
  "operator", // set-role
  "operator", // health
  "operator", // node reboot
  "operator", // node poweroff
  "machine 3", // systemctl start
  "operator", // wait
];

/** How long one block may run: its `metroctl wait`s have 300 s. */
const blockTimeoutMs = 330_000;
/** How long the test waits for what the guide's prose says to wait for. */
const waitTimeoutMs = 120_000;

const suite = testbedSuite(
  "guide: the README's cluster on several machines, run on the testbed",
  () => (findTool("jq") === undefined ? "the guide uses jq: apt-get install jq" : undefined),
);

/** The unit's TimeoutStopSec: SIGKILL to a node's group this long after SIGTERM. */
const stopTimeoutMs = 30_000;

/** The mount at `point` in a process's mountinfo (the topmost, when several are stacked). */
function mountAt(
  mountInfo: string,
  point: string,
): { readOnly: boolean; fsType: string } | undefined {
  let found: { readOnly: boolean; fsType: string } | undefined;
  for (const line of mountInfo.split("\n")) {
    const [before, after] = line.split(" - ");
    const fields = before?.split(" ") ?? [];
    if (after === undefined || fields[4] !== point) continue;
    found = { readOnly: (fields[5] ?? "").split(",").includes("ro"), fsType: after.split(" ")[0] };
  }
  return found;
}

/** The soft (or hard) "Max open files" of a /proc/PID/limits. */
function openFilesLimit(limits: string, which: "soft" | "hard" = "soft"): number {
  const m = /^Max open files\s+(\d+)\s+(\d+)/m.exec(limits);
  if (!m) throw new Error(`no "Max open files" in ${limits}`);
  return Number(which === "soft" ? m[1] : m[2]);
}

/** Whether a TCP connection to `host:port` is accepted (it is closed at once). */
function accepts(host: string, port: number): Promise<boolean> {
  return new Promise((done) => {
    const socket = connect({ host, port });
    socket.setTimeout(2000);
    const end = (ok: boolean) => {
      socket.destroy();
      done(ok);
    };
    socket.once("connect", () => end(true));
    socket.once("error", () => end(false));
    socket.once("timeout", () => end(false));
  });
}

/** A JSON object's fields, or an error naming `what`. */
function record(value: unknown, what: string): Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new Error(`${what}: not a JSON object: ${JSON.stringify(value)}`);
  }
  return Object.fromEntries(Object.entries(value));
}

/** A JSON array's elements, each an object. */
function records(value: unknown, what: string): Record<string, unknown>[] {
  if (!Array.isArray(value)) throw new Error(`${what}: not a JSON array: ${JSON.stringify(value)}`);
  return value.map((v: unknown, i) => record(v, `${what}[${i}]`));
}

/** A node as `metroctl nodes -o json` prints it: the fields the guide promises. */
interface ListedNode {
  id: string;
  address: string | null;
  state: string;
  health: string;
  roles: string[];
  machineLabel: string | undefined;
}

function listedNode(v: Record<string, unknown>): ListedNode {
  const labels = record(v.labels, "labels");
  const roles = Array.isArray(v.roles) ? v.roles.map(String) : [];
  return {
    id: String(v.id),
    address: typeof v.address === "string" ? v.address : null,
    state: String(v.state),
    health: String(v.health),
    roles,
    machineLabel: typeof labels.machine === "string" ? labels.machine : undefined,
  };
}

(suite.runs ? describe : describe.skip)(suite.title, () => {
  let testbed: Testbed | undefined;
  let base: string;
  /** Each machine's node: its unit's ExecStart in the unit's sandbox, under an emulated manager. */
  const services = new Map<number, EmulatedUnit>();
  /** How many `systemctl` starts of each machine were handled. */
  const handled = new Map<number, number>();
  /** Each machine's node root, from its unit. */
  const roots = new Map<number, string>();
  let blocks: GuideBlock[];

  const operatorDir = () => join(base, "operator");
  const machineDir = (machine: number) => join(base, `machine${machine}`);
  const unitDir = (machine: number) => join(machineDir(machine), "etc", "systemd", "system");
  const bed = (): Testbed => {
    if (!testbed) throw new Error("no testbed");
    return testbed;
  };

  /** What every block's bash gets first: errors stop it, the wrappers on PATH. */
  const commonPrelude = () =>
    `set -euo pipefail\nexport PATH=${shellQuote(join(base, "bin"))}:"$PATH"\n`;

  /** The operator's machine: its home and config dir, `scp` to the machines' directories. */
  function operatorPrelude(): string {
    const t = bed();
    const dirs = new Map([1, 2, 3].map((m) => [t.address(m), machineDir(m)]));
    return `${commonPrelude()}export HOME=${shellQuote(operatorDir())}
export XDG_CONFIG_HOME=${shellQuote(join(operatorDir(), ".config"))}
cd "$HOME"
if [ -f .guide-env ]; then source .guide-env; fi
${scpStandIn(dirs)}set -x
`;
  }

  /** Machine `m`: its /etc/systemd/system for install-service, `systemctl` recorded for the test. */
  function machinePrelude(m: number): string {
    const dir = machineDir(m);
    return `${commonPrelude()}export HOME=${shellQuote(join(dir, "root"))}
cd "$HOME"
metropolis-node() {
  if [ "\${1-}" = install-service ]; then
    command metropolis-node "$@" --unit-dir ${shellQuote(unitDir(m))}
  else
    command metropolis-node "$@"
  fi
}
systemctl() {
  case "$*" in
    daemon-reload) ;;
    "enable --now "*) echo "$3" >> ${shellQuote(join(dir, "systemctl-started"))} ;;
    "start "*) echo "$2" >> ${shellQuote(join(dir, "systemctl-started"))} ;;
    *) echo "systemctl $*: not stood in for by the guide test" >&2; return 1 ;;
  esac
}
set -x
`;
  }

  /** Runs a block's `script` (substituted) at `place`; throws with its output when it fails. */
  async function run(block: GuideBlock, machine?: number): Promise<string> {
    const t = bed();
    const where = machine === undefined ? "operator" : `machine ${machine}`;
    let result: BashResult;
    if (machine === undefined) {
      const script = substituteAddresses(block.script, (n) => t.address(n));
      const keep = assignedNames(script)
        .map((name) => `declare -p ${name} >> .guide-env\n`)
        .join("");
      result = await runBash(`${operatorPrelude()}${script}${keep}`, blockTimeoutMs);
    } else {
      const written = block.place.kind === "machines" ? block.place.machines[0] : machine;
      const script = machinePaths(
        substituteAddresses(block.script, (n) => t.address(n === written ? machine : n)),
        machineDir(machine),
      );
      const [nsenter, args] = t.commandLine(machine, "true", []);
      result = await runBash(`${machinePrelude(machine)}${script}`, blockTimeoutMs, [
        nsenter,
        ...args.slice(0, -1),
      ]);
    }
    process.stdout.write(
      `guide, README line ${block.line}, ${where}:\n${result.stderr}${result.stdout}\n`,
    );
    if (result.code !== 0) {
      throw new Error(
        `the guide's block at README line ${block.line} failed on ${where} ` +
          `(${result.signal ?? `exit ${result.code}`}):\n${result.stderr}${result.stdout}`,
      );
    }
    return result.stdout;
  }

  /** Runs one `metroctl` command line as the operator and parses its JSON output. */
  async function operatorJson(commandLine: string): Promise<unknown> {
    const result = await runBash(`${operatorPrelude()}${commandLine}\n`, 60_000);
    if (result.code !== 0) throw new Error(`${commandLine}: ${result.stderr}`);
    return JSON.parse(result.stdout);
  }

  const listNodes = async () =>
    records(await operatorJson("metroctl nodes -o json"), "nodes").map(listedNode);

  /**
   * Starts the units `systemctl enable --now` or `start` named on machine
   * `m` since the last call: each unit's ExecStart, which must be this node
   * binary with the node's flags, in its sandbox, under the emulated
   * service manager (unit-sandbox.ts).
   */
  async function startUnits(m: number): Promise<void> {
    const started = (await readFile(join(machineDir(m), "systemctl-started"), "utf8"))
      .split("\n")
      .filter((name) => name !== "");
    const fresh = started.slice(handled.get(m) ?? 0);
    handled.set(m, started.length);
    for (const name of fresh) {
      expect(name).toBe("metropolis-node");
      const existing = services.get(m);
      if (existing) {
        existing.start();
        continue;
      }
      await startUnit(m, join(unitDir(m), `${name}.service`));
    }
  }

  /** Checks the unit at `unitPath` (machine `m`'s) and starts it. */
  async function startUnit(m: number, unitPath: string): Promise<void> {
    const unit = await readFile(unitPath, "utf8");
    const analyze = findTool("systemd-analyze");
    if (analyze !== undefined) {
      const verified = await runBash(
        `${shellQuote(analyze)} verify ${shellQuote(unitPath)}\n`,
        60_000,
      );
      expect({ code: verified.code, stderr: verified.stderr }).toEqual({ code: 0, stderr: "" });
    }
    const execStart = serviceDirectives(unit).get("ExecStart") ?? [];
    expect(execStart).toHaveLength(1);
    // The node's bin with the node's flags: --root R --address A [--parameters P].
    const [executable, binary, ...flags] = execStart[0].split(" ");
    expect(executable).toBe(process.execPath);
    // The installed copy's bin (see beforeAll), the symlink on PATH resolved.
    expect(binary).toBe(join(base, "lib", "metropolis-node", "bin", basename(nodeBin)));
    const value = (flag: string) => {
      const i = flags.indexOf(flag);
      return i < 0 ? undefined : flags[i + 1];
    };
    const root = value("--root");
    const parametersPath = value("--parameters");
    if (root === undefined) throw new Error(`${unitPath}: ${execStart[0]}`);
    expect(flags).toEqual([
      "--root",
      root,
      "--address",
      bed().address(m),
      ...(parametersPath === undefined ? [] : ["--parameters", parametersPath]),
    ]);
    roots.set(m, root);
    const service = new EmulatedUnit({
      testbed: bed(),
      host: m,
      unit,
      logFile: join(machineDir(m), "node.log"),
    });
    services.set(m, service);
    service.start();
  }

  /** Waits until `metroctl cluster members` lists three voters; resolves with its view. */
  const threeVoters = () =>
    eventually(
      async () => {
        const view = record(await operatorJson("metroctl cluster members -o json"), "members");
        // Reachable voters, each with its curator: every member's node back and serving.
        const voters = records(view.members, "members").filter(
          (m) =>
            m.status === "voter" && m.reachability === "reachable" && m.curatorRunning === true,
        );
        return voters.length === 3 ? view : false;
      },
      "three reachable voting etcd members, each with its curator running",
      { timeoutMs: waitTimeoutMs, intervalMs: 500 },
    );

  /** Machine 3's node's runs that ended, as the reboot and power-off blocks leave them. */
  const machine3Runs: Omit<UnitRun, "pid">[] = [
    { exit: { code: 75, signal: null }, leftovers: false, restarted: true },
    { exit: { code: 0, signal: null }, leftovers: false, restarted: false },
  ];

  /** Machine 3's node's Boot ID (`metroctl node describe -o json`). */
  async function bootId3(): Promise<string> {
    const node3 = (await listNodes()).find((n) => n.machineLabel === "m3");
    if (!node3) throw new Error("no node labelled machine=m3");
    const described = record(
      await operatorJson(`metroctl node describe ${node3.id} -o json`),
      "node describe",
    );
    return String(described.bootId);
  }
  let bootBeforeReboot: string | undefined;

  /** Waits until machine 3's unit's runs that ended are the first `n` of {@link machine3Runs}. */
  const machine3RunsEnded = (n: number) =>
    eventually(
      () => {
        const runs = services.get(3)?.runs ?? [];
        return (
          runs.length === n &&
          JSON.stringify(
            runs.map(({ exit, leftovers, restarted }) => ({ exit, leftovers, restarted })),
          ) === JSON.stringify(machine3Runs.slice(0, n))
        );
      },
      `machine 3's node to have exited ${n} times as the guide says`,
      { timeoutMs: waitTimeoutMs, intervalMs: 100 },
    );

  /** What the guide's prose says of a block's outcome, checked (polled) after it. */
  const postconditions = new Map<number, () => Promise<unknown>>([
    [
      8, // "it is back once `metroctl node describe` shows a new Boot ID and it is HEALTHY"
      async () => {
        await machine3RunsEnded(1);
        await eventually(
          async () => {
            const node3 = (await listNodes()).find((n) => n.machineLabel === "m3");
            return node3?.health === "HEALTHY" && (await bootId3()) !== bootBeforeReboot;
          },
          "machine 3's node back with a new Boot ID, HEALTHY",
          { timeoutMs: waitTimeoutMs, intervalMs: 500 },
        );
      },
    ],
    [
      9, // "it stays stopped"
      async () => {
        await machine3RunsEnded(2);
        expect(services.get(3)?.current).toBeUndefined();
      },
    ],
    [
      10, // `systemctl start` starts it
      async () => {
        expect(services.get(3)?.current).toBeDefined();
      },
    ],
  ]);

  /** What the guide's prose says to wait for before block `index`, polled. */
  const preconditions = new Map<number, () => Promise<unknown>>([
    [
      8, // the reboot: its Boot ID before, and three voters (the quorum check refuses otherwise)
      async () => {
        await threeVoters();
        bootBeforeReboot = await bootId3();
      },
    ],
    [
      2, // "once the node listens on 7835"
      () =>
        eventually(
          () => accepts(bed().address(1), defaultCuratorPort),
          "node 1's curator port to accept connections",
          { timeoutMs: waitTimeoutMs, intervalMs: 200 },
        ),
    ],
    [
      3, // "Once `metroctl nodes` shows node 1 at its address"
      () =>
        eventually(
          async () => (await listNodes()).some((n) => n.address === bed().address(1)),
          "metroctl nodes to show node 1 at its address",
          { timeoutMs: waitTimeoutMs, intervalMs: 500 },
        ),
    ],
    [
      5, // "Once `metroctl approve` lists both"
      () =>
        eventually(
          async () =>
            records(await operatorJson("metroctl approve -o json"), "approve").length === 2,
          "metroctl approve to list machines 2 and 3",
          { timeoutMs: waitTimeoutMs, intervalMs: 500 },
        ),
    ],
  ]);

  beforeAll(async () => {
    blocks = guideBlocks(await readFile(readme, "utf8"));
    // Not under /tmp: install-service refuses it (the service would see it private).
    base = await mkdtemp("/dev/shm/metropolis-e2e-guide-");
    await mkdir(join(base, "bin"));
    // As the guide installs them: the packages' bins, symlinked onto PATH. Each package's
    // bin, bundle and package.json are copied out of the checkout first, which may itself lie
    // under /tmp (a CI clone), where install-service refuses the executable.
    for (const [name, bin] of [
      ["metropolis-node", nodeBin],
      ["metroctl", metroctlBin],
    ]) {
      if (!existsSync(bundleOf(bin))) {
        throw new Error(`${bundleOf(bin)} is not built: npm run build:bundles`);
      }
      const packageDir = resolve(bin, "..", "..");
      const installed = join(base, "lib", name);
      for (const part of ["bin", "bundle", "package.json"]) {
        await cp(join(packageDir, part), join(installed, part), { recursive: true });
      }
      await symlink(join(installed, "bin", basename(bin)), join(base, "bin", name));
    }
    await mkdir(join(operatorDir(), ".config"), { recursive: true });
    for (const m of [1, 2, 3]) {
      await mkdir(join(machineDir(m), "root"), { recursive: true });
      await mkdir(unitDir(m), { recursive: true });
      await writeFile(join(machineDir(m), "systemctl-started"), "");
    }
    testbed = await Testbed.create({ hosts: 3 });
  });

  afterAll(async () => {
    // Every node this test started, by its PID (SIGTERM, SIGKILL to its group after 30 s).
    await Promise.all([...services.values()].map((service) => service.stop(stopTimeoutMs)));
    // Their ephemeral tmpfs went with their mount namespaces; a node mounts none of its own
    // there, but where it did (a unit without TemporaryFileSystem=), it is released.
    for (const root of roots.values()) await removeNodeRoot(root);
    await testbed?.destroy();
    if (base !== undefined) {
      if (process.env.METROPOLIS_E2E_KEEP) {
        process.stdout.write(`e2e guide: kept ${base}\n`);
      } else {
        await rm(base, { recursive: true, force: true });
      }
    }
  });

  it("has its blocks where the guide says, in order", () => {
    expect(blocks.map((b) => describePlace(b.place))).toEqual(expectedPlaces);
  });

  // One test per block, in the guide's order (jest runs them in order; a
  // failed block fails the ones after it).
  let failedBlock: number | undefined;
  for (let index = 0; index < expectedPlaces.length; index++) {
    it(`runs block ${index + 1} (${expectedPlaces[index]})`, async () => {
      if (failedBlock !== undefined) throw new Error(`block ${failedBlock + 1} failed before`);
      failedBlock = index;
      const block = blocks[index];
      await preconditions.get(index)?.();
      const after = postconditions.get(index);
      const place: GuidePlace = block.place;
      if (place.kind === "operator") {
        await run(block);
      } else {
        for (const m of place.machines) {
          await run(block, m);
          await startUnits(m);
        }
      }
      await after?.();
      failedBlock = undefined;
    });
  }

  it("made the cluster the guide promises: three nodes UP and HEALTHY, three voting members", async () => {
    const t = bed();
    const listed = await listNodes();
    expect(listed).toHaveLength(3);
    for (const m of [1, 2, 3]) {
      const node = listed.find((n) => n.machineLabel === `m${m}`);
      expect(node).toMatchObject({
        address: t.address(m),
        state: "UP",
        health: "HEALTHY",
      });
      expect(node?.roles).toContain("consensus");
    }
    // "voters once they caught up": a new member is a learner first.
    const members = await threeVoters();
    expect(record(members.faultTolerance, "faultTolerance")).toMatchObject({
      voters: 3,
      tolerates: 1,
    });
    // Each node, and its etcd, in its machine's network namespace and its unit's sandbox.
    const ownMounts = readlinkSync("/proc/self/ns/mnt");
    // LimitNOFILE=1048576, or this process's hard limit where it cannot be raised.
    const ownHardLimit = openFilesLimit(readFileSync("/proc/self/limits", "utf8"), "hard");
    for (const [m, unit] of services) {
      const service = unit.current;
      if (!service) throw new Error(`machine ${m}'s node is not running`);
      const mounts = service.mountNamespace();
      expect(mounts).not.toBe(ownMounts);
      const root = roots.get(m) ?? "";
      const mountInfo = readFileSync(`/proc/${service.pid}/mountinfo`, "utf8");
      expect([m, mountAt(mountInfo, "/")?.readOnly]).toEqual([m, true]);
      expect([m, mountAt(mountInfo, root)?.readOnly]).toEqual([m, false]);
      expect([m, mountAt(mountInfo, `${root}/ephemeral`)?.fsType]).toEqual([m, "tmpfs"]);
      expect([m, mountAt(mountInfo, "/tmp")?.fsType]).toEqual([m, "tmpfs"]);
      const status = readFileSync(`/proc/${service.pid}/status`, "utf8");
      expect([m, /^NoNewPrivs:\s+1$/m.test(status)]).toEqual([m, true]);
      const limits = readFileSync(`/proc/${service.pid}/limits`, "utf8");
      expect([m, openFilesLimit(limits)]).toEqual([m, Math.min(1048576, ownHardLimit)]);
      const want = `net:[${statSync(t.namespacePath(m)).ino}]`;
      const group = processGroupMembers(service.pid) ?? [];
      expect(group.length).toBeGreaterThanOrEqual(2);
      for (const pid of group) {
        expect([pid, readlinkSync(`/proc/${pid}/ns/net`)]).toEqual([pid, want]);
        expect([pid, readlinkSync(`/proc/${pid}/ns/mnt`)]).toEqual([pid, mounts]);
      }
    }
  });

  it("stops every node as `systemctl stop` does (SIGTERM): exit 0, nothing left", async () => {
    for (const [m, unit] of services) {
      const last = await unit.stop(stopTimeoutMs);
      expect([m, last?.exit, last?.leftovers]).toEqual([m, { code: 0, signal: null }, false]);
      // Machine 3's node exited twice before: 75 after the reboot (started again), 0 after the
      // power-off (left stopped); the others never.
      const runs = unit.runs.map(({ exit, leftovers, restarted }) => ({
        exit,
        leftovers,
        restarted,
      }));
      expect([m, runs.slice(0, -1)]).toEqual([m, m === 3 ? machine3Runs : []]);
    }
    for (const m of [1, 2, 3]) expect(await bed().processes(m)).toEqual([]);
  });
});
