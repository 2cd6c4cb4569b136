/**
 * e2e operating guide: the root README's "Operating a cluster", run as
 * written on the multi-host testbed, so that it cannot rot. Every block
 * marked `<!-- operating: … -->` (guide-blocks.ts) runs in order, through
 * bash, with the packages' bins on PATH as the README's guide puts them,
 * against a cluster like the one that guide builds: three consensus members
 * (E2eCluster, node N on testbed host N), labelled `machine=m1` … `m3` as
 * the guide's registration labels them, whose owner's config dir is the
 * operator's. After each block the test checks what the section promises:
 *
 * - the backup job: the crontab the block installed is run as cron would run
 *   it (each job line's command with `/bin/sh -c`, cron's `\%` unescaped, the
 *   crontab's `PATH=` and the user's HOME): a backup file in the directory
 *   (0700), mode 0600, that reads as a checked backup of the three nodes
 *   whose keyring opens with the owner's key, taken by the backup credential;
 * - `cluster health` passes (polled before the block: right after a start a
 *   clock sample may not be in yet) and the support bundle is a 0600
 *   .tar.gz with its README.txt;
 * - the reader and operator credentials work within their roles (the reader
 *   is refused a label, PERMISSION_DENIED naming its role; the operator's
 *   label is there), and after `access revoke` the reader is refused by the
 *   curator at once and by a node's Debug service once its CRL has it,
 *   while the operator still works;
 * - `cluster rolling-reboot`: every node has a new boot ID, all HEALTHY,
 *   three voters;
 * - `node decommission` + `delete`: the node's process exits 1, its record
 *   is gone, two voters remain; and, as the prose says, a reboot of either
 *   is then refused (FAILED_PRECONDITION) and the node not asked;
 * - the restore: the test first loses the quorum for good (the two
 *   remaining members SIGKILLed and their roots removed), then runs the
 *   scp block, and the machine-4 block (`metropolis-node --recover-from …`,
 *   which runs on as the node) in the background in host 4's namespace;
 *   once the restored curator answers (the old nodes then listed UP without
 *   the consensus role, as the prose says), the next block waits for the
 *   restored node, decommissions and deletes the old nodes and passes
 *   `cluster health`: one node left, UP and HEALTHY at machine 4's address,
 *   only the credential issued before the backup, the owner's endpoints
 *   remembered, the restore's log naming the backup's revision; the node then stops on Ctrl-C (SIGINT to its process
 *   group) with exit 0, leaving no process on its host.
 *
 * What stands in for what a real machine has (in the preludes below):
 * addresses `10.0.0.N` → host N's address on the testbed; the operator's
 * `~` → a directory of the test's (`HOME`, `XDG_CONFIG_HOME`, whose
 * `metroctl` is the cluster's owner config dir); `crontab -` → the crontab
 * kept in a file, which the test runs (above); `scp FILE root@ADDR:PATH` → a
 * copy into that machine's directory; machine 4's `/var/lib/…` and `/root/…`
 * → the same paths under machine 4's directory. Shell variables a block sets
 * (`NODE1=…`) are kept for the blocks after it.
 *
 * Not run: the section's prose around the restore (old machines brought
 * back, the node installed as a service, new members enrolled): the guide's
 * own blocks, run by guide.test.ts, restore-rejoin.test.ts and
 * backup-restore.test.ts's new members do that. It
 * needs root, a testbed and jq; elsewhere it is skipped with the reason in
 * its name. `METROPOLIS_E2E_KEEP=1` keeps its directory (machine 4's node
 * log: `machine4/node.log`).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, openSync, closeSync } from "node:fs";
import { mkdir, mkdtemp, readdir, readFile, rm, stat, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { connect } from "node:net";
import { join, resolve } from "node:path";
import { defaultCuratorPort } from "@metropolis/curator";
import { openBackupKeyring, readBackupFile } from "@metropolis/consensus";
import { ConfigDir, runMetroctl } from "@metropolis/metroctl";
import { eventually } from "@metropolis/supervisor/testing";
import { findTool } from "../local-cluster/src/host-command";
import { removeNodeRoot } from "../local-cluster/src/node-root-removal";
import type { Testbed } from "../local-cluster/src/testbed";
import { testbedSuite } from "../local-cluster/src/testing";
import { E2eCluster } from "./e2e-cluster";
import { describePlace, guideBlocks, substituteAddresses, type GuideBlock } from "./guide-blocks";
import {
  assignedNames,
  machinePaths,
  runBash,
  scpStandIn,
  shellQuote,
  type BashResult,
} from "./guide-shell";

jest.setTimeout(900_000);

const repo = resolve(__dirname, "..");
const readme = join(repo, "README.md");
/** The executables as the guide puts them on PATH: the packages' bins, which run their bundles. */
const bins = {
  "metropolis-node": join(repo, "packages", "node", "bin", "metropolis-node.js"),
  metroctl: join(repo, "packages", "metroctl", "bin", "metroctl.js"),
};

/** Where the blocks run, in the section's order: a changed section fails here first. */
const expectedPlaces = [
  "operator", // the nodes' IDs
  "operator", // backup credential, crontab
  "operator", // cluster health, support
  "operator", // access issue, list
  "operator", // the credentials used
  "operator", // access revoke
  "operator", // cluster rolling-reboot
  "operator", // node decommission, delete
  "operator", // scp the backup and the owner key
  "machine 4", // metropolis-node --recover-from
  "operator", // members, old nodes decommissioned and deleted, health
];

/** How long one block may run (a rolling reboot: four steps of at most 300 s, in practice seconds). */
const blockTimeoutMs = 330_000;
/** How long the test waits for what the section's prose says to wait for. */
const waitTimeoutMs = 120_000;

const suite = testbedSuite(
  "operating guide: the README's operating a cluster, run on the testbed",
  () => (findTool("jq") === undefined ? "the section uses jq: apt-get install jq" : undefined),
);

/** metroctl in-process with config dir `dir` (the owner's, or a credential's). */
async function metroctlAs(
  dir: string,
  args: readonly string[],
): Promise<{ exitCode: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const exitCode = await runMetroctl(["--config", dir, ...args], {
    stdout: { write: (s: string) => (stdout += s) },
    stderr: { write: (s: string) => (stderr += s) },
  });
  return { exitCode, stdout, stderr };
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

/** A node as `metroctl nodes -o json` prints it: the fields checked here. */
interface ListedNode {
  id: string;
  address: string | null;
  state: string;
  health: string;
  roles: string[];
  labels: Record<string, string>;
}

/** A machine's block running in the background (machine 4's node), and how it ended. */
interface Background {
  child: ChildProcess;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

(suite.runs ? describe : describe.skip)(suite.title, () => {
  let e2e: E2eCluster;
  let base: string;
  let blocks: GuideBlock[];
  /** Machine 4's node (the restore), while it runs. */
  let restore: Background | undefined;
  /** The backup's etcd revision, read from the file the cron job wrote. */
  let backupRevision: number | undefined;
  /** The IDs of the cluster's three nodes, by machine (`m1` …). */
  const ids = new Map<number, string>();

  const operatorDir = () => join(base, "operator");
  const machineDir = (m: number) => join(base, `machine${m}`);
  const binDir = () => join(base, "bin");
  const ownerDir = () => e2e.cluster.metroctlDir;
  const bed = (): Testbed => {
    if (!e2e.testbed) throw new Error("no testbed");
    return e2e.testbed;
  };
  const owner = (args: readonly string[]) => metroctlAs(ownerDir(), args);
  const ownerJson = async (args: readonly string[]): Promise<unknown> => {
    const res = await owner(args);
    if (res.exitCode !== 0) throw new Error(`metroctl ${args.join(" ")}: ${res.stderr}`);
    return JSON.parse(res.stdout);
  };
  const listNodes = async () => (await ownerJson(["nodes", "-o", "json"])) as ListedNode[];

  /** What every block's bash gets first: errors stop it, the bins on PATH. */
  const commonPrelude = () => `set -euo pipefail\nexport PATH=${shellQuote(binDir())}:"$PATH"\n`;

  /** The operator's machine: its home and config dir, `scp` to machine 4, `crontab -` to a file. */
  const operatorPrelude = () => `${commonPrelude()}export HOME=${shellQuote(operatorDir())}
export XDG_CONFIG_HOME=${shellQuote(join(operatorDir(), ".config"))}
cd "$HOME"
if [ -f .guide-env ]; then source .guide-env; fi
${scpStandIn(new Map([[bed().address(4), machineDir(4)]]))}# crontab -: the user's crontab replaced by stdin (kept in a file, which the test runs)
crontab() {
  if [ "$*" != "-" ]; then echo "crontab $*: not stood in for by the test" >&2; return 1; fi
  cat > "$HOME/.crontab"
}
set -x
`;

  /** Runs an operator block (substituted); throws with its output when it fails. */
  async function runOperator(block: GuideBlock): Promise<string> {
    const script = substituteAddresses(block.script, (n) => bed().address(n));
    const keep = assignedNames(script)
      .map((name) => `declare -p ${name} >> .guide-env\n`)
      .join("");
    const result = await runBash(`${operatorPrelude()}${script}${keep}`, blockTimeoutMs);
    report(block, "operator", result);
    return result.stdout;
  }

  function report(block: GuideBlock, where: string, result: BashResult): void {
    process.stdout.write(
      `operating guide, README line ${block.line}, ${where}:\n${result.stderr}${result.stdout}\n`,
    );
    if (result.code !== 0) {
      throw new Error(
        `the section's block at README line ${block.line} failed on ${where} ` +
          `(${result.signal ?? `exit ${result.code}`}):\n${result.stderr}${result.stdout}`,
      );
    }
  }

  /**
   * Starts machine `m`'s block in the background, in host `m`'s namespace,
   * as root, its output in the machine's `node.log`: the block runs a node
   * in the foreground, as the section says.
   */
  function startMachineBlock(block: GuideBlock, m: number): Background {
    const script = machinePaths(
      substituteAddresses(block.script, (n) => bed().address(n)),
      machineDir(m),
    );
    const [nsenter, args] = bed().commandLine(m, "bash", ["-s"]);
    const log = openSync(join(machineDir(m), "node.log"), "a");
    const child = spawn(nsenter, args, { stdio: ["pipe", log, log], detached: true });
    closeSync(log);
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) =>
      child.once("exit", (code, signal) => done({ code, signal })),
    );
    child.stdin?.on("error", () => undefined);
    child.stdin?.end(`${commonPrelude()}export HOME=${shellQuote(join(machineDir(m), "root"))}
cd "$HOME"
set -x
${script}`);
    return { child, exited };
  }

  /** Stops a background block as Ctrl-C does (SIGINT to its process group); SIGKILL after 30 s. */
  async function interrupt(b: Background) {
    const group = b.child.pid;
    if (group === undefined) return b.exited;
    const signal = (s: NodeJS.Signals) => {
      try {
        process.kill(-group, s);
      } catch {
        // gone already
      }
    };
    signal("SIGINT");
    const timer = setTimeout(() => signal("SIGKILL"), 30_000);
    try {
      return await b.exited;
    } finally {
      clearTimeout(timer);
    }
  }

  /** The operator's shell variable `name`, as the blocks before kept it. */
  async function shellVariable(name: string): Promise<string> {
    const result = await runBash(`${operatorPrelude()}set +x\nprintf %s "$${name}"\n`, 10_000);
    if (result.code !== 0) throw new Error(`$${name}: ${result.stderr}`);
    return result.stdout;
  }

  /** Each node's boot ID as the curator has it. */
  async function bootIds(): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    for (const id of ids.values()) {
      const described = (await ownerJson(["node", "describe", id, "-o", "json"])) as {
        bootId?: string;
      };
      out.set(id, String(described.bootId));
    }
    return out;
  }

  /** Polls until `cluster health` passes (exit 0). */
  const healthPasses = (dir = ownerDir()) =>
    eventually(
      async () => (await metroctlAs(dir, ["cluster", "health"])).exitCode === 0,
      "metroctl cluster health to pass",
      { timeoutMs: waitTimeoutMs, intervalMs: 1000 },
    ).catch(async (e: unknown) => {
      throw new Error(
        `${String(e)}; last: ${(await metroctlAs(dir, ["cluster", "health"])).stdout}`,
      );
    });

  /** Runs the crontab the backup block installed as cron would: each job's command. */
  async function runCronJobs(): Promise<number> {
    const crontab = await readFile(join(operatorDir(), ".crontab"), "utf8");
    const env = new Map<string, string>([
      ["HOME", operatorDir()],
      ["LOGNAME", "root"],
      ["SHELL", "/bin/sh"],
      ["PATH", "/usr/bin:/bin"],
    ]);
    let jobs = 0;
    for (const line of crontab.split("\n")) {
      if (line.trim() === "" || line.trimStart().startsWith("#")) continue;
      const assignment = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line);
      if (assignment) {
        // The operator's /usr/local/bin, where the guide links metroctl: the test's bin.
        env.set(
          assignment[1],
          assignment[2].replace(/(^|:)\/usr\/local\/bin(?=:|$)/, `$1${binDir()}`),
        );
        continue;
      }
      const job = /^(\S+\s+){5}(.*)$/.exec(line);
      if (!job) throw new Error(`not a crontab line: ${line}`);
      // cron: an unescaped % ends the command (the rest is its stdin); \% is a %.
      expect(job[2].replace(/\\%/g, "")).not.toContain("%");
      const command = job[2].replace(/\\%/g, "%");
      const assignments = [...env].map(([k, v]) => shellQuote(`${k}=${v}`)).join(" ");
      const result = await runBash(
        `cd ${shellQuote(operatorDir())}\nexec env -i ${assignments} /bin/sh -c ${shellQuote(command)}\n`,
        blockTimeoutMs,
      );
      process.stdout.write(
        `operating guide, cron job: ${command}\n${result.stderr}${result.stdout}\n`,
      );
      expect({ command, code: result.code, stderr: result.stderr }).toEqual({
        command,
        code: 0,
        stderr: "",
      });
      jobs++;
    }
    return jobs;
  }

  /** What the section's prose says to wait for (or the test must do) before block `index`. */
  const preconditions = new Map<number, () => Promise<unknown>>([
    [2, () => healthPasses()],
    [6, () => healthPasses()], // "it starts only on a healthy cluster"
    [
      8, // quorum lost for good: both remaining members gone with their data
      async () => {
        for (const m of [1, 2]) {
          const node = e2e.node(m);
          await e2e.cluster.killNode(node);
          await removeNodeRoot(node.root);
        }
      },
    ],
    [
      10, // the restored node's curator answers (asked with a copy of the owner's config dir)
      async () => {
        const probe = join(base, "probe-metroctl");
        await rm(probe, { recursive: true, force: true });
        await mkdir(probe, { mode: 0o700 });
        for (const file of await readdir(ownerDir())) {
          await writeFile(join(probe, file), await readFile(join(ownerDir(), file)), {
            mode: 0o600,
          });
        }
        const address = bed().address(4);
        let ended: string | undefined;
        void restore?.exited.then((exit) => (ended = JSON.stringify(exit)));
        const outcome = await eventually(
          async () => {
            if (ended !== undefined) return "ended";
            if (!(await accepts(address, defaultCuratorPort))) return false;
            const res = await metroctlAs(probe, ["--endpoints", address, "nodes"]);
            return res.exitCode === 0 && "answers";
          },
          "the restored node's curator to answer",
          { timeoutMs: waitTimeoutMs, intervalMs: 500 },
        );
        if (outcome === "ended") {
          const log = await readFile(join(machineDir(4), "node.log"), "utf8");
          throw new Error(`machine 4's block ended (${ended}):\n${log.slice(-6000)}`);
        }
        // "The old nodes are listed UP but no longer consensus members."
        const listed = await metroctlAs(probe, ["--endpoints", address, "nodes", "-o", "json"]);
        const old = (JSON.parse(listed.stdout) as ListedNode[]).filter((n) =>
          [...ids.values()].includes(n.id),
        );
        expect(old.map((n) => [n.id, n.state, n.roles.includes("consensus")]).sort()).toEqual(
          [...ids.values()].map((id) => [id, "UP", false]).sort(),
        );
      },
    ],
  ]);

  /** What the section promises after block `index`, checked. */
  const postconditions = new Map<number, () => Promise<unknown>>([
    [
      0, // the IDs of the three nodes, by label
      async () => {
        for (const m of [1, 2, 3]) expect(await shellVariable(`NODE${m}`)).toBe(ids.get(m));
      },
    ],
    [
      1, // the backup job, run as cron runs it
      async () => {
        expect(await runCronJobs()).toBe(1);
        const dir = join(operatorDir(), "metropolis-backups");
        expect((await stat(dir)).mode & 0o777).toBe(0o700);
        const files = await readdir(dir);
        expect(files).toEqual([expect.stringMatching(/^cluster-\d{4}-\d{2}-\d{2}\.backup$/)]);
        const file = join(dir, files[0]);
        expect((await stat(file)).mode & 0o777).toBe(0o600);
        const backup = await readBackupFile(file);
        expect(backup.header.nodeVersions).toHaveLength(3);
        backupRevision = backup.header.revision;
        // Sealed to the owner's key, which opens it.
        const ownerKey = await new ConfigDir(ownerDir()).readOwnerKey();
        if (!ownerKey) throw new Error("the owner's config dir has no key");
        expect(() => openBackupKeyring(backup, ownerKey.privateKey)).not.toThrow();
        // Taken with the backup credential, which may do nothing else.
        const credential = join(operatorDir(), ".config", "metroctl-backup");
        const refused = await metroctlAs(credential, ["nodes"]);
        expect(refused.exitCode).toBe(1);
        expect(refused.stderr).toContain(
          'the backup role (credential "nightly-backup") may not call Management.GetNodes',
        );
      },
    ],
    [
      2, // the support bundle
      async () => {
        const files = (await readdir(operatorDir())).filter((f) => f.startsWith("support-"));
        expect(files).toEqual([expect.stringMatching(/^support-\d{4}-\d{2}-\d{2}\.tar\.gz$/)]);
        const file = join(operatorDir(), files[0]);
        expect((await stat(file)).mode & 0o777).toBe(0o600);
        const listed = await runBash(`tar -tzf ${shellQuote(file)}\n`, 60_000);
        expect(listed.code).toBe(0);
        expect(listed.stdout).toMatch(/^metropolis-support-[^/]+\/README\.txt$/m);
        for (const id of ids.values()) expect(listed.stdout).toContain(`/nodes/${id}/`);
      },
    ],
    [
      3, // the credentials issued, listed
      async () => {
        expect(await ownerJson(["access", "list", "-o", "json"])).toEqual(
          expect.arrayContaining([
            expect.objectContaining({ name: "nightly-backup", role: "backup", status: "active" }),
            expect.objectContaining({ name: "alice", role: "reader", status: "active" }),
            expect.objectContaining({ name: "bob", role: "operator", status: "active" }),
          ]),
        );
      },
    ],
    [
      4, // each within its role
      async () => {
        const node2 = ids.get(2) ?? "";
        const labelled = (await listNodes()).find((n) => n.id === node2);
        expect(labelled?.labels).toMatchObject({ machine: "m2", rack: "r2" });
        const refused = await metroctlAs(join(operatorDir(), "alice-metroctl"), [
          "label",
          node2,
          "rack=r9",
        ]);
        expect(refused.exitCode).toBe(1);
        expect(refused.stderr).toContain("PERMISSION_DENIED");
        expect(refused.stderr).toContain(
          'the reader role (credential "alice") may not call Management.UpdateNodeLabels',
        );
      },
    ],
    [
      5, // revoked: the curator at once, the nodes within seconds; bob untouched
      async () => {
        const alice = join(operatorDir(), "alice-metroctl");
        const refused = await metroctlAs(alice, ["nodes"]);
        expect(refused.exitCode).toBe(1);
        expect(refused.stderr).toContain("UNAUTHENTICATED");
        await eventually(
          async () =>
            (await metroctlAs(alice, ["tree", ids.get(1) ?? ""])).stderr.includes(
              "UNAUTHENTICATED",
            ),
          "node 1 to refuse the revoked reader",
          { timeoutMs: 20_000 },
        );
        expect((await metroctlAs(join(operatorDir(), "bob-metroctl"), ["nodes"])).exitCode).toBe(0);
      },
    ],
    [
      7, // decommissioned: stopped, record gone, two voters; a reboot of either refused
      async () => {
        const node3 = e2e.node(3);
        const exit = await e2e.measure("decommissioned node stopped", async () =>
          node3.process ? node3.process.exited : undefined,
        );
        expect(exit).toEqual({ code: 1, signal: null });
        expect((await listNodes()).map((n) => n.id).sort()).toEqual(
          [ids.get(1), ids.get(2)].sort(),
        );
        const staying = [e2e.node(1), e2e.node(2)];
        for (const members of await e2e.votingMembers(staying)) {
          expect(members).toEqual(staying.map((n) => n.id).sort());
        }
        for (const node of staying) {
          const before = node.process;
          const res = await owner(["node", "reboot", node.id]);
          expect(res.exitCode).toBe(1);
          expect(res.stderr).toContain(
            `FAILED_PRECONDITION: rebooting node ${node.id} is refused: afterwards 1 healthy voter would remain, fewer than the quorum of 2 (of 2 voters); wait until the consensus is healthy, or force it (--force)`,
          );
          expect(node.process).toBe(before);
          expect(before?.running).toBe(true);
        }
      },
    ],
    [
      8, // the backup and the owner key on machine 4
      async () => {
        for (const file of ["cluster.backup", "owner-key.pem"]) {
          expect(existsSync(join(machineDir(4), "root", file))).toBe(true);
        }
      },
    ],
    [
      10, // the cluster as of the backup, the old nodes gone, healthy, owner's endpoints remembered
      async () => {
        const address = bed().address(4);
        const listed = await listNodes();
        expect(listed).toEqual([
          expect.objectContaining({
            address,
            state: "UP",
            health: "HEALTHY",
            roles: ["consensus", "controller"],
          }),
        ]);
        const endpoints = await new ConfigDir(ownerDir()).readEndpoints();
        expect(endpoints.map((e) => e.host)).toEqual([address]);
        const log = await readFile(join(machineDir(4), "node.log"), "utf8");
        expect(log).toContain(
          `every write up to revision ${backupRevision} is restored; writes made after the backup was taken are lost`,
        );
        // The credentials as of the backup: the backup job's, issued before it; not alice's.
        const credentials = (await ownerJson(["access", "list", "-o", "json"])) as {
          name: string;
        }[];
        expect(credentials.map((c) => c.name)).toEqual(["nightly-backup"]);
      },
    ],
  ]);

  beforeAll(async () => {
    blocks = guideBlocks(await readFile(readme, "utf8"), "operating");
    for (const bin of Object.values(bins)) {
      const bundle = join(bin, "..", "..", "bundle");
      if (!existsSync(bundle)) throw new Error(`${bundle} is not built: npm run build:bundles`);
    }
    e2e = await E2eCluster.create("operating-guide", { nodes: 3, hosts: true });
    await e2e.up();
    // As the guide's registration labels them.
    for (const m of [1, 2, 3]) {
      const node = e2e.node(m);
      ids.set(m, node.id);
      await e2e.cluster.metroctlOk(["label", node.id, `machine=m${m}`]);
    }
    // Machine 4, for the restore.
    expect(await bed().addHost()).toBe(4);
    // Short: machine 4's node's etcd socket, under its root's ephemeral/, must fit a unix socket
    // path (107 bytes); under e2e.dir it did not, and the restore's etcd client never connected.
    base = await mkdtemp(join(tmpdir(), "metropolis-og-"));
    await mkdir(binDir(), { recursive: true });
    for (const [name, bin] of Object.entries(bins)) await symlink(bin, join(binDir(), name));
    await mkdir(join(operatorDir(), ".config"), { recursive: true });
    await symlink(ownerDir(), join(operatorDir(), ".config", "metroctl"));
    await mkdir(join(machineDir(4), "root"), { recursive: true });
    await mkdir(join(machineDir(4), "var", "lib"), { recursive: true });
  }, 300_000);

  afterAll(async () => {
    // Machine 4's node, by its process group, then its root (its ephemeral tmpfs with it).
    if (restore) await interrupt(restore);
    if (base !== undefined) {
      await removeNodeRoot(join(machineDir(4), "var", "lib", "metropolis"));
      if (process.env.METROPOLIS_E2E_KEEP) {
        process.stdout.write(`e2e operating guide: kept ${base}\n`);
      } else {
        await rm(base, { recursive: true, force: true });
      }
    }
    await e2e?.teardown();
  });

  it("has its blocks where the section says, in order", () => {
    expect(blocks.map((b) => describePlace(b.place))).toEqual(expectedPlaces);
  });

  // One test per block, in the section's order (a failed block fails the ones after it).
  let failedBlock: number | undefined;
  for (let index = 0; index < expectedPlaces.length; index++) {
    it(`runs block ${index + 1} (${expectedPlaces[index]})`, async () => {
      if (failedBlock !== undefined) throw new Error(`block ${failedBlock + 1} failed before`);
      failedBlock = index;
      const block = blocks[index];
      await preconditions.get(index)?.();
      const before = index === 6 ? await bootIds() : undefined;
      const started = performance.now();
      if (block.place.kind === "operator") {
        await runOperator(block);
      } else {
        expect(block.place.machines).toEqual([4]);
        restore = startMachineBlock(block, 4);
      }
      e2e.note(`block ${index + 1} (README line ${block.line})`, performance.now() - started);
      if (before) {
        // Every node rebooted: a new boot ID each; all HEALTHY, three voters.
        const after = await bootIds();
        for (const [id, boot] of before) expect([id, after.get(id)]).not.toEqual([id, boot]);
        const nodes = [1, 2, 3].map((m) => e2e.node(m));
        await e2e.allHealthy(nodes, 60_000);
        await e2e.votingMembers(nodes);
      }
      await postconditions.get(index)?.();
      failedBlock = undefined;
    });
  }

  it("stops the restored node as Ctrl-C does: exit 0, nothing left on its host", async () => {
    if (!restore) throw new Error("the restore never started");
    const exit = await interrupt(restore);
    restore = undefined;
    expect(exit).toEqual({ code: 0, signal: null });
    expect(await bed().processes(4)).toEqual([]);
  });
});
