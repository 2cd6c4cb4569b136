/**
 * `node describe`, `approve` without an ID, and the listing options of
 * `nodes` (`--filter`, `--columns`, `-o table|wide|json|yaml`) against a real
 * curator leader (real etcd, real mTLS on loopback); and `completion`.
 */
import { execFile } from "node:child_process";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { parse as parseYaml } from "yaml";
import { common } from "@metropolis/proto";
import { clusterPerFile, metroctl, tempDir, type MetroctlCluster } from "./cluster-fixture";

let cluster: MetroctlCluster;
let config: string;
clusterPerFile((c, dir) => ((cluster = c), (config = dir)));

const oneErrorLine = (stderr: string) => {
  const lines = stderr.split("\n").filter((l) => l !== "");
  expect(lines).toHaveLength(1);
  return lines[0];
};

/** The first column of a table's rows (without the heading). */
const ids = (table: string) =>
  table
    .trimEnd()
    .split("\n")
    .slice(1)
    .map((l) => l.split(/\s+/)[0]);

const statusTime = new Date("2026-01-02T03:04:05.678Z");
let leaderId: string;
let worker: string; // UP, worker, zone=a
let pending: string; // NEW, zone=b
let pendingToo: string; // NEW, no labels

beforeAll(async () => {
  const { leader } = cluster;
  leaderId = leader.firstNode.nodeId;
  await leader.updateNode(leaderId, (n) => ({
    ...n,
    labels: new Map([["zone", "a"]]),
    status: common.NodeStatus.fromPartial({
      externalAddress: "127.0.0.9",
      runningCurator: { port: 7835 },
      version: "v1.2.3",
      bootId: "boot-1",
      timestamp: statusTime,
      protocolVersion: 1,
    }),
  }));
  leader.ctx.heartbeats.beat(leaderId);
  worker = (
    await leader.addNode({
      roles: { kubernetesWorker: {} },
      labels: new Map([["zone", "a"]]),
    })
  ).nodeId;
  pending = (
    await leader.addNode({ state: common.NodeState.NEW, labels: new Map([["zone", "b"]]) })
  ).nodeId;
  pendingToo = (await leader.addNode({ state: common.NodeState.NEW })).nodeId;
});

describe("node describe", () => {
  it("shows the leader's status, roles, labels, address, consensus and curator as text", async () => {
    const res = await metroctl(config, ["node", "describe", leaderId]);
    expect(res).toMatchObject({ code: 0, stderr: "" });
    const lines = res.stdout.trimEnd().split("\n");
    expect(lines).toEqual([
      `ID:          ${leaderId}`,
      "State:       UP",
      expect.stringMatching(/^Health: {6}HEALTHY \(heartbeat [\d.]+s ago\)$/),
      "Roles:       consensus, controller",
      "Labels:      zone=a",
      "Address:     127.0.0.9",
      "Version:     v1.2.3 (wire protocol 1)",
      "Boot ID:     boot-1",
      "Status time: 2026-01-02T03:04:05.678Z",
      "Consensus:   member (voter or learner: see metroctl cluster members)",
      "Curator:     running on port 7835, leader",
    ]);
  });

  it("says what a NEW node lacks", async () => {
    const res = await metroctl(config, ["node", "describe", pending]);
    expect(res.code).toBe(0);
    expect(res.stdout).toContain("State:       NEW\n");
    expect(res.stdout).toContain("Health:      UNKNOWN (no heartbeat yet)\n");
    expect(res.stdout).toContain("Roles:       -\n");
    expect(res.stdout).toContain("Address:     -\n");
    expect(res.stdout).toContain("Consensus:   not a member\n");
    expect(res.stdout).toContain("Curator:     not running\n");
  });

  it("prints the same facts as JSON and YAML", async () => {
    const json = await metroctl(config, ["node", "describe", leaderId, "-o", "json"]);
    expect(json.code).toBe(0);
    const described = JSON.parse(json.stdout) as Record<string, unknown>;
    expect(described).toEqual({
      id: leaderId,
      address: "127.0.0.9",
      state: "UP",
      roles: ["consensus", "controller"],
      health: "HEALTHY",
      heartbeatAgeSeconds: expect.any(Number) as unknown,
      labels: { zone: "a" },
      version: "v1.2.3",
      protocolVersion: 1,
      bootId: "boot-1",
      statusTime: "2026-01-02T03:04:05.678Z",
      consensus: { member: true, voter: null },
      curator: { running: true, port: 7835, leader: true },
    });
    const yaml = await metroctl(config, ["node", "describe", leaderId, "-o", "yaml"]);
    expect(yaml.code).toBe(0);
    expect({ ...parseYaml(yaml.stdout), heartbeatAgeSeconds: 0 }).toEqual({
      ...described,
      heartbeatAgeSeconds: 0,
    });

    const other = await metroctl(config, ["node", "describe", worker, "-o", "json"]);
    expect(JSON.parse(other.stdout)).toMatchObject({
      roles: ["worker"],
      consensus: { member: false, voter: null },
      curator: { running: false, port: null, leader: false },
    });
  });

  it("reports an unknown node and a malformed ID in one line", async () => {
    const missing = "metropolis-" + "cd".repeat(16);
    const res = await metroctl(config, ["node", "describe", missing]);
    expect(res.code).toBe(1);
    expect(oneErrorLine(res.stderr)).toBe(`metroctl: node describe: node ${missing} not found`);
    const bad = await metroctl(config, ["node", "describe", "nope"]);
    expect(bad.code).toBe(1);
    expect(oneErrorLine(bad.stderr)).toBe(
      'metroctl: node describe: "nope" is not a node ID (metropolis- followed by 32 hex digits)',
    );
  });
});

describe("approve without an ID", () => {
  it("lists the nodes waiting for approval, and only those", async () => {
    const res = await metroctl(config, ["approve"]);
    expect(res).toMatchObject({ code: 0, stderr: "" });
    expect(res.stdout.split("\n")[0]).toMatch(/^ID\s+ADDRESS\s+STATE/);
    expect(ids(res.stdout)).toEqual([pending, pendingToo].sort());
    const filtered = await metroctl(config, ["approve", "--filter", '"zone" in node.labels']);
    expect(ids(filtered.stdout)).toEqual([pending]);
  });

  it("refuses listing flags together with an ID, approving nothing", async () => {
    const res = await metroctl(config, ["approve", pendingToo, "-o", "json"]);
    expect(res.code).toBe(1);
    expect(oneErrorLine(res.stderr)).toBe(
      "metroctl: approve: --filter, --columns and -o list pending nodes: give them without an ID",
    );
    expect((await cluster.leader.getNode(pendingToo))?.state).toBe(common.NodeState.NEW);
  });
});

describe("nodes --filter", () => {
  it("shows the nodes the expression is true for", async () => {
    const upWorkers = await metroctl(config, [
      "nodes",
      "--filter",
      'node.state == "UP" && "worker" in node.roles',
    ]);
    expect(upWorkers).toMatchObject({ code: 0, stderr: "" });
    expect(ids(upWorkers.stdout)).toEqual([worker]);

    // A node without the label does not match (and is not an error).
    const zoneA = await metroctl(config, ["nodes", "--filter", 'node.labels["zone"] == "a"']);
    expect(ids(zoneA.stdout)).toEqual([leaderId, worker].sort());

    const leading = await metroctl(config, ["nodes", "--filter", "node.curator.leader"]);
    expect(ids(leading.stdout)).toEqual([leaderId]);

    const json = await metroctl(config, ["nodes", "-o", "json", "--filter", 'node.state == "NEW"']);
    expect((JSON.parse(json.stdout) as { id: string }[]).map((n) => n.id)).toEqual(
      [pending, pendingToo].sort(),
    );
  });

  it("shows only the heading when nothing matches", async () => {
    const res = await metroctl(config, ["nodes", "--filter", 'node.state == "DECOMMISSIONED"']);
    expect(res).toMatchObject({ code: 0, stderr: "" });
    expect(res.stdout).toMatch(/^ID\s+ADDRESS\s+STATE\s+ROLES\s+HEALTH\s+HEARTBEAT\s+LABELS\n$/);
    const json = await metroctl(config, ["nodes", "-o", "json", "--filter", "false"]);
    expect(JSON.parse(json.stdout)).toEqual([]);
  });

  it("refuses a bad expression before dialling, naming the problem and its position", async () => {
    // An endpoint nothing listens on: a filter error must come before any dialling.
    const run = (filter: string) =>
      metroctl(config, [
        "--endpoints",
        "127.0.0.1:1",
        "--dial-timeout",
        "1",
        "nodes",
        "--filter",
        filter,
      ]);

    const syntax = await run('node.state == "UP" &&');
    expect(syntax.code).toBe(1);
    expect(oneErrorLine(syntax.stderr)).toBe(
      "metroctl: nodes: --filter: Unexpected token: EOF at position 22 (end of expression)",
    );
    const field = await run('node.sate == "UP"');
    expect(oneErrorLine(field.stderr)).toBe(
      'metroctl: nodes: --filter: No such key: sate at position 6 (near "sate == "UP"")',
    );
    const type = await run("node.state == 1");
    expect(oneErrorLine(type.stderr)).toMatch(
      /^metroctl: nodes: --filter: no such overload: string == int at position 1 /,
    );
    const notBool = await run("node.id");
    expect(oneErrorLine(notBool.stderr)).toBe(
      "metroctl: nodes: --filter: the expression is a string, not a bool",
    );
  });
});

describe("nodes --columns and -o", () => {
  it("shows the chosen columns in the chosen order", async () => {
    const res = await metroctl(config, ["nodes", "--columns", "state,id,leader"]);
    expect(res).toMatchObject({ code: 0, stderr: "" });
    const lines = res.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^STATE\s+ID\s+LEADER$/);
    expect(lines).toContainEqual(expect.stringMatching(new RegExp(`^UP\\s+${leaderId}\\s+yes$`)));
    expect(lines).toContainEqual(expect.stringMatching(new RegExp(`^NEW\\s+${pending}\\s+-$`)));
  });

  it("refuses an unknown column, and columns with JSON or YAML", async () => {
    const bad = await metroctl(config, ["nodes", "--columns", "id,colour"]);
    expect(bad.code).toBe(1);
    expect(oneErrorLine(bad.stderr)).toBe(
      'metroctl: nodes: --columns: "colour" is not a column (columns: id, address, state, roles, health, heartbeat, labels, version, curator, leader)',
    );
    const json = await metroctl(config, ["nodes", "--columns", "id", "-o", "json"]);
    expect(oneErrorLine(json.stderr)).toBe(
      "metroctl: nodes: --columns: chooses table columns; -o json prints every field",
    );
  });

  it("prints wide tables, YAML equal to JSON, and refuses unknown formats", async () => {
    const wide = await metroctl(config, ["nodes", "-o", "wide"]);
    expect(wide.code).toBe(0);
    const lines = wide.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(
      /^ID\s+ADDRESS\s+STATE\s+ROLES\s+HEALTH\s+HEARTBEAT\s+LABELS\s+VERSION\s+CURATOR\s+LEADER$/,
    );
    expect(lines.find((l) => l.startsWith(leaderId))).toMatch(/\s+v1\.2\.3\s+:7835\s+yes$/);
    expect(lines.find((l) => l.startsWith(worker))).toMatch(/\s+zone=a\s+-\s+-\s+-$/);

    const json = await metroctl(config, ["nodes", "-o", "json", "--filter", "node.id != ''"]);
    const yaml = await metroctl(config, ["nodes", "-o", "yaml"]);
    expect(yaml).toMatchObject({ code: 0, stderr: "" });
    const withoutAges = (nodes: Record<string, unknown>[]) =>
      nodes.map((n) => ({ ...n, heartbeatAgeSeconds: n.heartbeatAgeSeconds === null }));
    expect(withoutAges(parseYaml(yaml.stdout) as Record<string, unknown>[])).toEqual(
      withoutAges(JSON.parse(json.stdout) as Record<string, unknown>[]),
    );

    const bad = await metroctl(config, ["nodes", "-o", "xml"]);
    expect(bad.code).toBe(1);
    expect(oneErrorLine(bad.stderr)).toMatch(
      /^metroctl: nodes: option '-o, --output <format>' argument 'xml' is invalid/,
    );
  });
});

describe("completion", () => {
  /** Every command and subcommand, as metroctl's own help lists them. */
  async function commandsOfHelp(args: string[]): Promise<string[]> {
    const help = await metroctl(config, [...args, "--help"]);
    const section = help.stdout.split("Commands:\n")[1] ?? "";
    return section
      .split("\n")
      .map((l) => /^ {2}([a-z-]+)/.exec(l)?.[1])
      .filter((c): c is string => c !== undefined && c !== "help");
  }

  it("prints a bash script that parses and names every command and flag", async () => {
    const res = await metroctl(config, ["completion", "bash"]);
    expect(res).toMatchObject({ code: 0, stderr: "" });
    const dir = await tempDir("completion");
    const script = join(dir, "metroctl.bash");
    await writeFile(script, res.stdout);
    await promisify(execFile)("bash", ["-n", script]);

    const top = await commandsOfHelp([]);
    expect(top).toEqual(
      expect.arrayContaining(["nodes", "approve", "node", "completion", "support"]),
    );
    const node = await commandsOfHelp(["node"]);
    expect(node).toContain("describe");
    const clusterGroup = await commandsOfHelp(["cluster"]);
    // The cluster group grows with every consensus command: these, and whatever else it has.
    expect(clusterGroup).toEqual(expect.arrayContaining(["configure", "members", "health"]));
    for (const command of [...top, ...node, ...clusterGroup])
      expect(res.stdout).toMatch(new RegExp(`\\b${command}\\b`));

    // What bash offers, by running the completion function itself.
    const complete = async (...words: string[]) => {
      const { stdout } = await promisify(execFile)("bash", [
        "-c",
        `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _metroctl; printf '%s\\n' "\${COMPREPLY[@]}"`,
        "bash",
        script,
        ...words,
      ]);
      return stdout.trim().split("\n");
    };
    expect(await complete("metroctl", "")).toEqual(expect.arrayContaining([...top, "--endpoints"]));
    expect(await complete("metroctl", "node", "")).toEqual([
      "describe",
      "metrics",
      "logs",
      "reboot",
      "poweroff",
      "decommission",
      "--help",
    ]);
    expect(await complete("metroctl", "nodes", "--")).toEqual(
      expect.arrayContaining(["--filter", "--columns", "--output"]),
    );
    expect(await complete("metroctl", "nodes", "-o", "")).toEqual([
      "table",
      "wide",
      "json",
      "yaml",
    ]);
    expect(await complete("metroctl", "completion", "")).toEqual(["bash", "zsh", "--help"]);
    expect(await complete("metroctl", "cluster", "")).toEqual(
      expect.arrayContaining(["configure", "members", "health", "--help"]),
    );
    expect(await complete("metroctl", "cluster", "members", "-o", "")).toEqual(["table", "json"]);
    expect(await complete("metroctl", "cluster", "configure", "")).toEqual(
      expect.arrayContaining(["get", "set", "--output"]),
    );
  });

  it("prints a zsh script naming every command", async () => {
    const res = await metroctl(config, ["completion", "zsh"]);
    expect(res).toMatchObject({ code: 0, stderr: "" });
    expect(res.stdout.startsWith("#compdef metroctl\n")).toBe(true);
    for (const command of [...(await commandsOfHelp([])), "describe"]) {
      expect(res.stdout).toContain(`'${command}:`);
    }
    expect(res.stdout).toContain("('nodes -o') compadd -- 'table' 'wide' 'json' 'yaml'");
  });

  // `npm test` installs zsh (scripts/ensure-etcd.sh --tests): the script must parse.
  it("prints a zsh script that zsh -n accepts", async () => {
    const res = await metroctl(config, ["completion", "zsh"]);
    const script = join(await tempDir("completion"), "_metroctl");
    await writeFile(script, res.stdout);
    await promisify(execFile)("zsh", ["-n", script]);
  });

  it("refuses an unknown shell", async () => {
    const res = await metroctl(config, ["completion", "fish"]);
    expect(res.code).toBe(1);
    expect(oneErrorLine(res.stderr)).toBe(
      "metroctl: completion: command-argument value 'fish' is invalid for argument 'shell'. Allowed choices are bash, zsh.",
    );
  });
});
