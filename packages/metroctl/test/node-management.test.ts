/**
 * `node logs`, `node reboot`, `node poweroff` and `cluster defrag --node` against a stand-in of a
 * node's NodeManagement service (the real one is packages/node's, tested
 * there) over real mTLS — the first node's certificate from the cluster CA,
 * the owner certificate required of callers — with the node's address found
 * through the real curator. The stand-in records what metroctl asked for.
 */
import { Server, status, type ServerWritableStream } from "@grpc/grpc-js";
import { freePort } from "@metropolis/consensus/testing";
import { curatorServerCredentials, identifier, requireOwner } from "@metropolis/curator";
import { tlsMaterial } from "@metropolis/pki";
import { api, common } from "@metropolis/proto";
import { eventually } from "@metropolis/supervisor/testing";
import { Capture, metroctl, clusterPerFile, type MetroctlCluster } from "./cluster-fixture";
import { logEntry as entry } from "./debug-server";

let cluster: MetroctlCluster;
let config: string;
const servers: Server[] = [];

clusterPerFile((c, dir) => ((cluster = c), (config = dir)));

afterEach(() => {
  for (const server of servers.splice(0)) server.forceShutdown();
});

interface StandIn {
  port: number;
  logRequests: api.LogsRequest[];
  /** "reboot" / "poweroff" / "defragment", as asked. */
  power: string[];
  callers: string[];
}

/** Serves a stand-in NodeManagement at a random 127.0.0.x and makes the first node's address point at it. */
async function serveNodeManagement(
  logs: (call: ServerWritableStream<api.LogsRequest, api.LogsResponse>) => Promise<void>,
): Promise<StandIn> {
  const { leader } = cluster;
  const host = `127.0.0.${2 + Math.floor(Math.random() * 250)}`;
  const port = await freePort(host);
  const identify = identifier(leader.caCertificate);
  const standIn: StandIn = { port, logRequests: [], power: [], callers: [] };
  const checkOwner = async (call: Parameters<typeof identify>[0]) => {
    const caller = await identify(call);
    standIn.callers.push(caller.kind);
    requireOwner(caller);
  };
  const denied = (e: unknown) => ({
    code: status.PERMISSION_DENIED,
    details: e instanceof Error ? e.message : String(e),
  });
  const unary =
    (action: string) =>
    (
      call: Parameters<typeof identify>[0],
      callback: (e: { code: status; details: string } | null, res?: object) => void,
    ): void =>
      void checkOwner(call).then(
        () => {
          standIn.power.push(action);
          callback(null, {});
        },
        (e: unknown) => callback(denied(e)),
      );
  const impl: api.NodeManagementServer = {
    logs: (call) => {
      standIn.logRequests.push(call.request);
      checkOwner(call)
        .then(() => logs(call))
        .then(
          () => call.end(),
          (e: unknown) => call.emit("error", denied(e)),
        );
    },
    reboot: unary("reboot"),
    powerOff: unary("poweroff"),
    defragmentMember: (call, callback) =>
      void checkOwner(call).then(
        () => {
          standIn.power.push("defragment");
          callback(null, { memberId: "8e9e05c52164694d", dbSizeBefore: 4096, dbSizeAfter: 1024 });
        },
        (e: unknown) => callback(denied(e)),
      ),
  };
  const server = new Server();
  server.addService(api.NodeManagementService, impl);
  const tls = tlsMaterial({
    certificate: leader.firstNode.certificate,
    privateKey: leader.firstNode.privateKey,
    ca: leader.caCertificate,
  });
  await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${host}:${port}`, curatorServerCredentials(tls), (err, p) =>
      err ? reject(err) : resolve(p),
    ),
  );
  servers.push(server);
  await leader.updateNode(leader.firstNode.nodeId, (n) => ({
    ...n,
    status: common.NodeStatus.fromPartial({ externalAddress: host }),
  }));
  return standIn;
}

describe("node logs", () => {
  it("asks for the DN (exact), level and backlog given; --concise prints `time level message`", async () => {
    const id = cluster.leader.firstNode.nodeId;
    const node = await serveNodeManagement(async (call) => {
      call.write({ entries: [entry(1, "warn", "root.curator", "slow", '{"ms":300}')] });
      call.write({ entries: [entry(2, "error", "root.curator", "lost")] });
    });
    const res = await metroctl(config, [
      "node",
      "logs",
      id,
      "--dn",
      "root.curator",
      "--exact",
      "--level",
      "warn",
      "--leveled-only",
      "--backlog",
      "5",
      "--concise",
      "--debug-port",
      String(node.port),
    ]);
    expect(res).toEqual({
      code: 0,
      stderr: "",
      stdout: "2024-05-01T12:00:01.000Z warn slow\n2024-05-01T12:00:02.000Z error lost\n",
    });
    expect(node.logRequests).toEqual([
      {
        dn: "root.curator",
        exact: true,
        minSeverity: api.LogSeverity.WARN,
        leveledOnly: true,
        backlogCount: 5,
        streamMode: api.LogsRequest_StreamMode.UNSPECIFIED,
      },
    ]);
    expect(node.callers).toEqual(["owner"]);
  });

  it("asks for the whole tree, every level, raw too, the whole backlog by default; prints the DN and meta", async () => {
    const id = cluster.leader.firstNode.nodeId;
    const node = await serveNodeManagement(async (call) => {
      call.write({ entries: [entry(1, "info", "root.a", "hello", '{"k":1}')] });
    });
    const res = await metroctl(config, [
      "node",
      "logs",
      id,
      "--backlog",
      "all",
      "--debug-port",
      String(node.port),
    ]);
    expect(res).toEqual({
      code: 0,
      stderr: "",
      stdout: '2024-05-01T12:00:01.000Z info root.a hello {"k":1}\n',
    });
    expect(node.logRequests).toEqual([
      {
        dn: "",
        exact: false,
        minSeverity: api.LogSeverity.UNSPECIFIED,
        leveledOnly: false,
        backlogCount: undefined,
        streamMode: api.LogsRequest_StreamMode.UNSPECIFIED,
      },
    ]);
  });

  it("with -f streams new entries until interrupted, then ends the stream and exits 0", async () => {
    const id = cluster.leader.firstNode.nodeId;
    let cancelled = false;
    const node = await serveNodeManagement(async (call) => {
      call.write({ entries: [entry(1, "info", "root", "first")] });
      await new Promise<void>((resolve) => call.once("cancelled", resolve));
      cancelled = true;
    });
    const stdout = new Capture();
    const interrupt = new AbortController();
    const running = metroctl(
      config,
      ["node", "logs", id, "-f", "--concise", "--debug-port", String(node.port)],
      { stdout, signal: interrupt.signal },
    );
    await eventually(() => stdout.text.includes(" first\n"), "the first streamed line");
    interrupt.abort();
    expect(await running).toMatchObject({ code: 0, stderr: "" });
    expect(node.logRequests[0]?.streamMode).toBe(api.LogsRequest_StreamMode.STREAM);
    await eventually(() => cancelled, "the server to see the stream cancelled");
  });

  it("refuses an unknown --level and --exact without --dn before dialling", async () => {
    const id = cluster.leader.firstNode.nodeId;
    const level = await metroctl(config, ["node", "logs", id, "--level", "loud"]);
    expect(level.code).not.toBe(0);
    expect(level.stderr).toMatch(/--level: unknown level "loud": one of debug, info, warn, error/);
    const exact = await metroctl(config, ["node", "logs", id, "--exact"]);
    expect(exact.code).not.toBe(0);
    expect(exact.stderr).toMatch(/--exact needs --dn/);
  });
});

describe("node reboot and node poweroff", () => {
  it("ask the curator leader's quorum check, then the node as the owner, and say what they do", async () => {
    const id = cluster.leader.firstNode.nodeId;
    const node = await serveNodeManagement(async () => undefined);
    const port = ["--debug-port", String(node.port)];
    // The first node is the cluster's only etcd voter: its going away is refused, and the node not asked.
    for (const action of ["reboot", "poweroff"]) {
      const refused = await metroctl(config, ["node", action, id, ...port]);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(
        new RegExp(
          `^metroctl: node ${action}: FAILED_PRECONDITION: (rebooting|powering off) node ${id} is refused: afterwards 0 healthy voters would remain, fewer than the quorum of 1 \\(of 1 voter\\); .*--force`,
        ),
      );
    }
    expect(node.power).toEqual([]);
    const risk = (action: string) =>
      `metroctl: node ${action}: --force: taking node ${id} away is not quorum-checked; if fewer healthy etcd voters than a quorum remain, the cluster stops committing writes (no node changes, no curator failover) until enough of them are back\n`;
    expect(await metroctl(config, ["node", "reboot", id, "--force", ...port])).toEqual({
      code: 0,
      stderr: risk("reboot"),
      stdout: `node ${id} is rebooting\n`,
    });
    expect(await metroctl(config, ["node", "poweroff", id, "--force", ...port])).toEqual({
      code: 0,
      stderr: risk("poweroff"),
      stdout: `node ${id} is powering off\n`,
    });
    expect(node.power).toEqual(["reboot", "poweroff"]);
    expect(node.callers).toEqual(["owner", "owner"]);
  });

  it("reports a node that is not in the cluster", async () => {
    const missing = "metropolis-" + "ef".repeat(16);
    // The curator's quorum check answers first; forced, metroctl finds no address for it.
    expect(await metroctl(config, ["node", "reboot", missing])).toMatchObject({
      code: 1,
      stderr: `metroctl: node reboot: NOT_FOUND: node ${missing} not found\n`,
    });
    const forced = await metroctl(config, ["node", "reboot", missing, "--force"]);
    expect(forced.code).toBe(1);
    expect(forced.stderr).toMatch(
      new RegExp(`metroctl: node reboot: node ${missing} not found\\n$`),
    );
  });
});

describe("cluster defrag --node", () => {
  it("asks the curator leader's quorum check, then the node as the owner; warns that the node runs the curator leader", async () => {
    const id = cluster.leader.firstNode.nodeId;
    const node = await serveNodeManagement(async () => undefined);
    const args = ["cluster", "defrag", "--node", id, "--debug-port", String(node.port)];
    // The first node is the cluster's only etcd voter: refused, and the node not asked.
    const refused = await metroctl(config, args);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(
      new RegExp(
        `^metroctl: cluster defrag: FAILED_PRECONDITION: defragmenting node ${id} is refused: afterwards 0 healthy voters would remain, fewer than the quorum of 1 \\(of 1 voter\\); .*--force`,
      ),
    );
    expect(node.power).toEqual([]);
    const forced = `metroctl: cluster defrag: --force: the stall of node ${id}'s etcd member is not quorum-checked; if fewer healthy etcd voters than a quorum remain, the cluster stops committing writes (no node changes, no curator failover) until enough of them are back\n`;
    // The first node runs the curator leader.
    const leader = `metroctl: cluster defrag: node ${id} runs the curator leader: its etcd member stalls while it is defragmented, which may make the curator leader step down (a failover of a few seconds)\n`;
    expect(await metroctl(config, [...args, "--force"])).toEqual({
      code: 0,
      stderr: forced + leader,
      stdout: `etcd member 8e9e05c52164694d (node ${id}) defragmented: 4096 -> 1024 bytes\n`,
    });
    const json = await metroctl(config, [...args, "--force", "-o", "json"]);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual({
      nodeId: id,
      memberId: "8e9e05c52164694d",
      dbSizeBefore: 4096,
      dbSizeAfter: 1024,
    });
    expect(node.power).toEqual(["defragment", "defragment"]);
    expect(node.callers).toEqual(["owner", "owner"]);
  });

  it("refuses --debug-port without --node, and a malformed node ID, before dialling", async () => {
    const port = await metroctl(config, ["cluster", "defrag", "--debug-port", "7837"]);
    expect(port.code).not.toBe(0);
    expect(port.stderr).toMatch(/--debug-port needs --node/);
    const id = await metroctl(config, ["cluster", "defrag", "--node", "nope"]);
    expect(id.code).not.toBe(0);
    expect(id.stderr).toMatch(/"nope" is not a node ID/);
  });
});
