/**
 * metroctl's Management commands against a real curator leader (real etcd,
 * real mTLS on loopback): what each prints, and that each change really
 * reached the cluster (read back from the leader's node records).
 */
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { api, common } from "@metropolis/proto";
import { metroctl, clusterPerFile, TerminalCapture, type MetroctlCluster } from "./cluster-fixture";
import { eventually } from "@metropolis/supervisor/testing";

let cluster: MetroctlCluster;
let config: string;

clusterPerFile((c, dir) => ((cluster = c), (config = dir)));

const oneErrorLine = (stderr: string) => {
  const lines = stderr.split("\n").filter((l) => l !== "");
  expect(lines).toHaveLength(1);
  return lines[0];
};

describe("nodes", () => {
  it("lists every node with address, state, roles, health and heartbeat", async () => {
    const { leader } = cluster;
    const first = leader.firstNode.nodeId;
    await leader.updateNode(first, (n) => ({
      ...n,
      status: common.NodeStatus.fromPartial({ externalAddress: "127.0.0.9" }),
    }));
    leader.ctx.heartbeats.beat(first);
    const fresh = await leader.addNode({
      state: common.NodeState.NEW,
      labels: new Map([["rack", "r1"]]),
    });

    const table = await metroctl(config, ["nodes"]);
    expect(table).toMatchObject({ code: 0, stderr: "" });
    const lines = table.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^ID\s+ADDRESS\s+STATE\s+ROLES\s+HEALTH\s+HEARTBEAT\s+LABELS$/);
    const firstRow = lines.find((l) => l.startsWith(first))!;
    expect(firstRow).toMatch(
      new RegExp(
        `^${first}\\s+127\\.0\\.0\\.9\\s+UP\\s+consensus,controller\\s+HEALTHY\\s+[\\d.]+s ago\\s+-$`,
      ),
    );
    const newRow = lines.find((l) => l.startsWith(fresh.nodeId))!;
    expect(newRow).toMatch(
      new RegExp(`^${fresh.nodeId}\\s+-\\s+NEW\\s+-\\s+UNKNOWN\\s+-\\s+rack=r1$`),
    );

    const json = await metroctl(config, ["nodes", "-o", "json"]);
    expect(json.code).toBe(0);
    const nodes = JSON.parse(json.stdout) as Record<string, unknown>[];
    const firstNode = nodes.find((n) => n.id === first)!;
    expect(Object.keys(firstNode).sort()).toEqual(
      ["address", "health", "heartbeatAgeSeconds", "id", "labels", "roles", "state"].sort(),
    );
    expect(firstNode).toMatchObject({
      address: "127.0.0.9",
      state: "UP",
      roles: ["consensus", "controller"],
      health: "HEALTHY",
      labels: {},
    });
    expect(typeof firstNode.heartbeatAgeSeconds).toBe("number");
    expect(nodes.find((n) => n.id === fresh.nodeId)).toEqual({
      id: fresh.nodeId,
      address: null,
      state: "NEW",
      roles: [],
      health: "UNKNOWN",
      heartbeatAgeSeconds: null,
      labels: { rack: "r1" },
    });
  });
});

describe("approve", () => {
  it("makes a NEW node STANDBY", async () => {
    const node = await cluster.leader.addNode({ state: common.NodeState.NEW });
    const res = await metroctl(config, ["approve", node.nodeId]);
    expect(res).toMatchObject({ code: 0, stdout: `node ${node.nodeId} approved\n`, stderr: "" });
    expect((await cluster.leader.getNode(node.nodeId))?.state).toBe(common.NodeState.STANDBY);
  });

  it("reports an unknown node as the cluster's NOT_FOUND, in one line", async () => {
    const missing = "metropolis-" + "ab".repeat(16);
    const res = await metroctl(config, ["approve", missing]);
    expect(res.code).toBe(1);
    expect(oneErrorLine(res.stderr)).toBe(
      `metroctl: approve: NOT_FOUND: node ${missing} not found`,
    );
  });
});

describe("set-role", () => {
  it("gives and takes away roles", async () => {
    // A Kubernetes controller must be a consensus member: the cluster checks that, not metroctl.
    const node = await cluster.leader.addNode({
      roles: { consensusMember: common.NodeRoles_ConsensusMember.create() },
    });
    const on = await metroctl(config, [
      "set-role",
      node.nodeId,
      "--worker",
      "on",
      "--controller",
      "on",
    ]);
    expect(on).toMatchObject({ code: 0, stderr: "" });
    let roles = (await cluster.leader.getNode(node.nodeId))?.roles;
    expect(roles?.kubernetesWorker).toBeDefined();
    expect(roles?.kubernetesController).toBeDefined();

    const off = await metroctl(config, ["set-role", node.nodeId, "--controller", "off"]);
    expect(off.code).toBe(0);
    roles = (await cluster.leader.getNode(node.nodeId))?.roles;
    expect(roles?.kubernetesWorker).toBeDefined();
    expect(roles?.kubernetesController).toBeUndefined();
  });

  it("refuses a value that is not on or off, without changing anything", async () => {
    const node = await cluster.leader.addNode();
    const res = await metroctl(config, ["set-role", node.nodeId, "--worker", "maybe"]);
    expect(res.code).toBe(1);
    expect(oneErrorLine(res.stderr)).toBe('metroctl: set-role: --worker: "maybe" is not on or off');
    expect((await cluster.leader.getNode(node.nodeId))?.roles?.kubernetesWorker).toBeUndefined();
  });
});

describe("label", () => {
  it("sets and removes labels", async () => {
    const node = await cluster.leader.addNode({ labels: new Map([["old", "x"]]) });
    const set = await metroctl(config, [
      "label",
      node.nodeId,
      "zone=a",
      "example.com/tier=gold",
      "old-",
    ]);
    expect(set).toMatchObject({ code: 0, stderr: "" });
    expect(Object.fromEntries((await cluster.leader.getNode(node.nodeId))?.labels ?? [])).toEqual({
      zone: "a",
      "example.com/tier": "gold",
    });
    const remove = await metroctl(config, ["label", node.nodeId, "zone-"]);
    expect(remove.code).toBe(0);
    expect(Object.fromEntries((await cluster.leader.getNode(node.nodeId))?.labels ?? [])).toEqual({
      "example.com/tier": "gold",
    });
  });

  it("refuses a malformed change before sending any", async () => {
    const node = await cluster.leader.addNode({ labels: new Map([["keep", "me"]]) });
    for (const bad of ["zone", "-bad=x", "zone=has space"]) {
      const res = await metroctl(config, ["label", node.nodeId, "ok=1", bad]);
      expect(res.code).toBe(1);
      expect(oneErrorLine(res.stderr)).toMatch(/^metroctl: label: /);
    }
    expect(Object.fromEntries((await cluster.leader.getNode(node.nodeId))?.labels ?? [])).toEqual({
      keep: "me",
    });
  });
});

describe("delete", () => {
  it("is refused for a node with roles, and allowed with --bypass", async () => {
    const node = await cluster.leader.addNode({
      state: common.NodeState.STANDBY,
      roles: { kubernetesWorker: {} },
    });
    const refused = await metroctl(config, ["delete", node.nodeId]);
    expect(refused.code).toBe(1);
    expect(oneErrorLine(refused.stderr)).toBe(
      `metroctl: delete: FAILED_PRECONDITION: node ${node.nodeId} still has roles: take them away first, or set bypass_has_roles`,
    );
    expect(await cluster.leader.getNode(node.nodeId)).toBeDefined();

    const bypassed = await metroctl(config, ["delete", node.nodeId, "--bypass", "has-roles"]);
    expect(bypassed).toMatchObject({ code: 0, stdout: `node ${node.nodeId} deleted\n` });
    expect(await cluster.leader.getNode(node.nodeId)).toBeUndefined();
  });

  it("is refused for an UP node unless node-up is bypassed; allowed for a node without roles that is not UP", async () => {
    const up = await cluster.leader.addNode();
    const refused = await metroctl(config, ["delete", up.nodeId]);
    expect(refused.code).toBe(1);
    expect(oneErrorLine(refused.stderr)).toMatch(
      /^metroctl: delete: FAILED_PRECONDITION: .* is UP/,
    );
    expect(await cluster.leader.getNode(up.nodeId)).toBeDefined();
    expect((await metroctl(config, ["delete", up.nodeId, "--bypass", "node-up"])).code).toBe(0);
    expect(await cluster.leader.getNode(up.nodeId)).toBeUndefined();

    const standby = await cluster.leader.addNode({ state: common.NodeState.STANDBY });
    expect((await metroctl(config, ["delete", standby.nodeId])).code).toBe(0);
    expect(await cluster.leader.getNode(standby.nodeId)).toBeUndefined();
  });

  it("refuses an unknown --bypass value", async () => {
    const node = await cluster.leader.addNode({ state: common.NodeState.STANDBY });
    const res = await metroctl(config, ["delete", node.nodeId, "--bypass", "everything"]);
    expect(res.code).toBe(1);
    expect(oneErrorLine(res.stderr)).toBe(
      'metroctl: delete: --bypass: "everything" is not one of has-roles, node-up',
    );
    expect(await cluster.leader.getNode(node.nodeId)).toBeDefined();
  });
});

describe("register-params", () => {
  it("writes the cluster's real ticket, CA and directory", async () => {
    const { leader } = cluster;
    const out = join(config, "register.pb");
    const res = await metroctl(config, ["register-params", "-o", out, "--label", "role=edge"]);
    expect(res).toMatchObject({ code: 0, stderr: "" });
    const params = api.NodeParameters.decode(await readFile(out));
    expect(params.cluster?.$case).toBe("clusterRegister");
    const register = (params.cluster as { clusterRegister: api.NodeParameters_ClusterRegister })
      .clusterRegister;

    const management = await leader.client(api.ManagementClient, "owner");
    const ticket = await new Promise<Buffer>((resolve, reject) =>
      management.getRegisterTicket({}, (err, r) => (err ? reject(err) : resolve(r.ticket))),
    );
    expect(Buffer.from(register.registerTicket).equals(ticket)).toBe(true);
    expect(Buffer.from(register.caCertificate).equals(leader.caCertificate)).toBe(true);
    expect(register.labels).toEqual(new Map([["role", "edge"]]));
    const first = register.clusterDirectory?.nodes.find((n) => n.id === leader.firstNode.nodeId);
    expect(first?.addresses).toEqual([{ host: "127.0.0.9" }]);
    expect(Buffer.from(first!.publicKey).equals(leader.firstNode.publicKey)).toBe(true);
  });
});

describe("cluster-info", () => {
  it("shows the CA fingerprint, storage policy and UP nodes", async () => {
    const { leader } = cluster;
    const json = await metroctl(config, ["cluster-info", "-o", "json"]);
    expect(json.code).toBe(0);
    const info = JSON.parse(json.stdout);
    const sha = createHash("sha256").update(leader.caCertificate).digest("hex");
    expect(info.caSha256).toBe(sha);
    expect(info.storagePolicy).toBe("ENCRYPTED");
    expect(info.nodes).toContainEqual({
      id: leader.firstNode.nodeId,
      publicKey: leader.firstNode.publicKey.toString("hex"),
      addresses: ["127.0.0.9"],
    });
    const table = await metroctl(config, ["cluster-info"]);
    expect(table.stdout).toContain(`sha256:${sha}`);
    expect(table.stdout).toMatch(new RegExp(`${leader.firstNode.nodeId}\\s+127\\.0\\.0\\.9`));
  });
});

describe("wait", () => {
  it("returns once the node reaches the state, showing on a terminal what it waits for", async () => {
    const node = await cluster.leader.addNode({ state: common.NodeState.NEW });
    const stderr = new TerminalCapture();
    const waiting = metroctl(
      config,
      ["wait", node.nodeId, "--state", "STANDBY", "--interval", "0.05", "--timeout", "20"],
      { stderr },
    );
    // The spinner shows what the node is now: proof that wait polled before the change.
    await eventually(() => stderr.text.includes("it is NEW"), "the spinner to show the node NEW");
    await cluster.leader.updateNode(node.nodeId, (n) => ({
      ...n,
      state: common.NodeState.STANDBY,
    }));
    const res = await waiting;
    expect(res.code).toBe(0);
    expect(res.stdout).toBe(`node ${node.nodeId} is STANDBY\n`);
    expect(stderr.text).toContain(`waiting for node ${node.nodeId} to be STANDBY`);
  });

  it("waits for health", async () => {
    const node = await cluster.leader.addNode();
    cluster.leader.ctx.heartbeats.beat(node.nodeId);
    const res = await metroctl(config, [
      "wait",
      node.nodeId,
      "--state",
      "up",
      "--health",
      "healthy",
    ]);
    expect(res).toMatchObject({ code: 0, stdout: `node ${node.nodeId} is UP and HEALTHY\n` });
  });

  it("fails with a clear message on timeout", async () => {
    const node = await cluster.leader.addNode({ state: common.NodeState.NEW });
    const res = await metroctl(config, [
      "wait",
      node.nodeId,
      "--state",
      "UP",
      "--timeout",
      "0.3",
      "--interval",
      "0.05",
    ]);
    expect(res.code).toBe(1);
    expect(res.stdout).toBe("");
    expect(oneErrorLine(res.stderr)).toMatch(
      new RegExp(`^metroctl: wait: node ${node.nodeId} not UP after [\\d.]+s: it is NEW, UNKNOWN$`),
    );
  });

  it("says that a node does not exist when it never appears", async () => {
    const missing = "metropolis-" + "cd".repeat(16);
    const res = await metroctl(config, ["wait", missing, "--state", "NEW", "--timeout", "0.2"]);
    expect(res.code).toBe(1);
    expect(oneErrorLine(res.stderr)).toMatch(/it does not exist$/);
  });

  it("ends with exit code 130 when interrupted", async () => {
    const node = await cluster.leader.addNode({ state: common.NodeState.NEW });
    const interrupt = new AbortController();
    const stderr = new TerminalCapture();
    const waiting = metroctl(config, ["wait", node.nodeId, "--state", "UP", "--interval", "0.05"], {
      signal: interrupt.signal,
      stderr,
    });
    await eventually(() => stderr.text.includes("it is NEW"), "wait to poll");
    interrupt.abort();
    const res = await waiting;
    expect(res.code).toBe(130);
    expect(stderr.text).toMatch(/metroctl: wait: interrupted\n$/);
  });
});

describe("endpoints", () => {
  it("are remembered after a command that reached the cluster", async () => {
    const { leader } = cluster;
    const fresh = await cluster.ownerConfig();
    // Forget the endpoints ownerConfig wrote, then give them once on the command line.
    await import("node:fs/promises").then((fs) => fs.rm(join(fresh, "endpoints")));
    const without = await metroctl(fresh, ["nodes"]);
    expect(without.code).toBe(1);
    expect(oneErrorLine(without.stderr)).toMatch(
      /^metroctl: nodes: no curator endpoints known in /,
    );

    const port = leader.address.split(":")[1];
    expect((await metroctl(fresh, ["--endpoints", `127.0.0.1:${port}`, "nodes"])).code).toBe(0);
    expect(await readFile(join(fresh, "endpoints"), "utf8")).toBe(`127.0.0.1:${port}\n`);
    expect((await metroctl(fresh, ["nodes"])).code).toBe(0);
  });

  it("that do not answer make a terminal show what metroctl waits for", async () => {
    const stderr = new TerminalCapture();
    const res = await metroctl(
      config,
      ["--endpoints", "127.0.0.1:1", "--dial-timeout", "1.5", "nodes"],
      { stderr },
    );
    expect(res.code).toBe(1);
    expect(stderr.text).toContain("reaching the curator leader through 127.0.0.1:1");
    expect(stderr.text).toMatch(/metroctl: nodes: .*\n$/);
  });

  it("are not remembered when they lead nowhere", async () => {
    const fresh = await cluster.ownerConfig();
    const before = await readFile(join(fresh, "endpoints"), "utf8");
    const res = await metroctl(fresh, [
      "--endpoints",
      "127.0.0.1:1",
      "--dial-timeout",
      "0.5",
      "nodes",
    ]);
    expect(res.code).toBe(1);
    expect(oneErrorLine(res.stderr)).toMatch(/^metroctl: nodes: /);
    expect(await readFile(join(fresh, "endpoints"), "utf8")).toBe(before);
  });
});
