/**
 * The NodeManagement service against a real supervision tree, served by a
 * real grpc-js server over the curator's mutual TLS with certificates of a
 * throwaway cluster CA: the owner gets logs filtered by DN (exact or with
 * children), minimum severity and backlog, then streamed; a node is
 * refused; Reboot and PowerOff are answered, then handed to the node;
 * DefragmentMember defragments the node's own real etcd member (one
 * bootstrapped under a test supervisor), a minute apart, and is refused
 * FAILED_PRECONDITION while the node runs none.
 * (Every caller of the authorization matrix: debug-authz.test.ts.)
 */
import {
  Metadata,
  Server,
  status,
  type ClientReadableStream,
  type ServiceError,
} from "@grpc/grpc-js";
import { hexMemberId, memberClient } from "@metropolis/consensus";
import {
  freePort,
  runTestMember,
  testNode,
  type TestMember,
  type TestNode,
} from "@metropolis/consensus/testing";
import {
  curatorClientCredentials,
  curatorServerCredentials,
  identifier,
  Revocations,
} from "@metropolis/curator";
import { CertificateAuthority, generateKeyPair, tlsMaterial } from "@metropolis/pki";
import { api } from "@metropolis/proto";
import type { Logger } from "@metropolis/supervisor";
import { eventually, testHarness, type TestHarness } from "@metropolis/supervisor/testing";
import { nodeStreams } from "../src/debug-service";
import { logsFilter, nodeManagementServer, type PowerAction } from "../src/node-management";

const deadlineMs = 10_000;

let h: TestHarness;
let server: Server;
let owner: api.NodeManagementClient;
let node: api.NodeManagementClient;
const loggers = {} as Record<"a" | "b", Logger>;
const powered: PowerAction[] = [];
/** The node's etcd member's socket, as node-tree.ts follows it (none until a test starts one). */
let etcdSocket: string | undefined;

beforeAll(async () => {
  const ca = await CertificateAuthority.create();
  const caPem = ca.certificate.toPem();
  const [self, nodeKeys, ownerKeys] = [generateKeyPair(), generateKeyPair(), generateKeyPair()];
  const serverTls = tlsMaterial({
    certificate: await ca.issueNodeCertificate(self.publicKey),
    privateKey: self.privateKey,
    ca: ca.certificate,
  });
  const nodeTls = tlsMaterial({
    certificate: await ca.issueNodeCertificate(nodeKeys.publicKey),
    privateKey: nodeKeys.privateKey,
    ca: ca.certificate,
  });
  const ownerTls = tlsMaterial({
    certificate: await ca.issueUserCertificate("owner", ownerKeys.publicKey),
    privateKey: ownerKeys.privateKey,
    ca: ca.certificate,
  });

  // root ─ a ─ b: a's lines, then b's, at every level.
  h = testHarness(async (ctx) => {
    ctx.run("a", async (a) => {
      a.run("b", async (b) => {
        loggers.b = b.logger;
        b.healthy();
        await b.untilAborted();
      });
      loggers.a = a.logger;
      a.healthy();
      await a.untilAborted();
    });
    ctx.healthy();
    await ctx.untilAborted();
  });
  await h.waitFor("root.a.b", "healthy");
  for (const name of ["a", "b"] as const) {
    const logger = loggers[name];
    logger.debug(`${name} debug`);
    logger.info(`${name} info`);
    logger.warn(`${name} warn`);
    logger.error(`${name} error`);
  }

  server = new Server();
  server.addService(
    api.NodeManagementService,
    nodeManagementServer({
      supervisor: h.supervisor,
      identify: identifier(ca.certificate.der, new Revocations(ca.certificate.der)),
      streams: nodeStreams(),
      power: (action) => powered.push(action),
      etcdSocket: () => etcdSocket,
    }),
  );
  const port = await freePort("127.0.0.1");
  await new Promise<number>((resolve, reject) =>
    server.bindAsync(`127.0.0.1:${port}`, curatorServerCredentials(serverTls), (err, p) =>
      err ? reject(err) : resolve(p),
    ),
  );
  const client = (tls: { cert: string; key: string }) =>
    new api.NodeManagementClient(`127.0.0.1:${port}`, curatorClientCredentials(caPem, tls));
  owner = client(ownerTls);
  node = client(nodeTls);
});

afterAll(async () => {
  owner?.close();
  node?.close();
  server?.forceShutdown();
  await h?.cleanup();
});

const deadline = () => ({ deadline: Date.now() + deadlineMs });

/** The messages of a Logs call that ends by itself (no streaming). */
function messages(req: Partial<api.LogsRequest>, client = owner): Promise<string[]> {
  const stream: ClientReadableStream<api.LogsResponse> = client.logs(
    api.LogsRequest.fromPartial(req),
    deadline(),
  );
  return new Promise((resolve, reject) => {
    const got: string[] = [];
    stream.on("data", (r: api.LogsResponse) => got.push(...r.entries.map((e) => e.message)));
    stream.on("error", reject);
    stream.on("end", () => resolve(got));
  });
}

it("sends the owner a DN's entries with its children's, or (exact) its own only", async () => {
  const a = ["a debug", "a info", "a warn", "a error"];
  const b = ["b debug", "b info", "b warn", "b error"];
  expect(await messages({ dn: "root.a" })).toEqual([...a, ...b]);
  expect(await messages({ dn: "root.a", exact: true })).toEqual(a);
  expect(await messages({ dn: "root.a.b", exact: true })).toEqual(b);
  // A DN is a whole name: root.a does not cover root.ab.
  expect(await messages({ dn: "root.a.", exact: false })).toEqual([]);
});

it("keeps entries at least as severe as the minimum", async () => {
  expect(await messages({ dn: "root.a", minSeverity: api.LogSeverity.WARN })).toEqual([
    "a warn",
    "a error",
    "b warn",
    "b error",
  ]);
  expect(
    await messages({ dn: "root.a.b", minSeverity: api.LogSeverity.ERROR, leveledOnly: true }),
  ).toEqual(["b error"]);
});

it("sends the last N matching entries of the backlog, all when unset, none for 0", async () => {
  expect(
    await messages({ dn: "root.a", minSeverity: api.LogSeverity.INFO, backlogCount: 2 }),
  ).toEqual(["b warn", "b error"]);
  expect(await messages({ dn: "root.a", backlogCount: 0 })).toEqual([]);
});

it("streams new matching entries after the backlog until the client cancels", async () => {
  const stream = owner.logs(
    api.LogsRequest.fromPartial({
      dn: "root.a.b",
      exact: true,
      minSeverity: api.LogSeverity.WARN,
      backlogCount: 1,
      streamMode: api.LogsRequest_StreamMode.STREAM,
    }),
  );
  const got: string[] = [];
  stream.on("data", (r: api.LogsResponse) => got.push(...r.entries.map((e) => e.message)));
  const ended = new Promise<ServiceError>((resolve) => stream.on("error", resolve));
  await eventually(() => got.length === 1, "the backlog", { timeoutMs: deadlineMs });
  loggers.a.error("a later");
  loggers.b.info("b quiet");
  loggers.b.warn("b later");
  await eventually(() => got.length === 2, "the streamed entry", { timeoutMs: deadlineMs });
  expect(got).toEqual(["b error", "b later"]);
  stream.cancel();
  expect((await ended).code).toBe(status.CANCELLED);
});

it("refuses a node certificate PERMISSION_DENIED, and never reboots for it", async () => {
  await expect(messages({ dn: "root" }, node)).rejects.toMatchObject({
    code: status.PERMISSION_DENIED,
  });
  const refused = await new Promise<ServiceError | null>((resolve) =>
    node.reboot({}, (e) => resolve(e)),
  );
  expect(refused?.code).toBe(status.PERMISSION_DENIED);
  expect(powered).toEqual([]);
});

it("refuses an unknown minimum severity INVALID_ARGUMENT", async () => {
  await expect(messages({ minSeverity: 17 as api.LogSeverity })).rejects.toMatchObject({
    code: status.INVALID_ARGUMENT,
  });
});

it("answers the owner's Reboot and PowerOff, then hands them to the node", async () => {
  await new Promise<void>((resolve, reject) =>
    owner.reboot({}, (e) => (e ? reject(e) : resolve())),
  );
  await new Promise<void>((resolve, reject) =>
    owner.powerOff({}, (e) => (e ? reject(e) : resolve())),
  );
  await eventually(() => powered.length === 2, "both actions", { timeoutMs: deadlineMs });
  expect(powered).toEqual(["reboot", "poweroff"]);
});

describe("logsFilter", () => {
  const entry = (dn: string, level: string) => ({ dn, level, message: "", time: 0 });

  it("passes raw entries (levels off the scale) unless leveled_only, whatever the minimum", () => {
    const base = { dn: "root", exact: false, minSeverity: api.LogSeverity.ERROR };
    expect(logsFilter({ ...base, leveledOnly: false })(entry("root.x", "verbose"))).toBe(true);
    expect(logsFilter({ ...base, leveledOnly: true })(entry("root.x", "verbose"))).toBe(false);
    expect(logsFilter({ ...base, leveledOnly: false })(entry("root.x", "warn"))).toBe(false);
    expect(logsFilter({ ...base, leveledOnly: false })(entry("rooted", "error"))).toBe(false);
  });
});

describe("DefragmentMember", () => {
  let etcdNode: TestNode | undefined;
  let member: TestMember | undefined;

  afterAll(async () => {
    etcdSocket = undefined;
    await member?.harness.cleanup();
    await etcdNode?.remove();
  });

  const defragment = (client = owner) =>
    new Promise<api.DefragmentMemberResponse>((resolve, reject) =>
      client.defragmentMember({}, new Metadata(), deadline(), (e, res) =>
        e ? reject(e) : resolve(res),
      ),
    );

  it("is refused FAILED_PRECONDITION, naming why, while the node runs no etcd member", async () => {
    await expect(defragment()).rejects.toMatchObject({
      code: status.FAILED_PRECONDITION,
      details: expect.stringMatching(/^this node runs no etcd member .*nothing to defragment/),
    });
  });

  it("refuses a node certificate PERMISSION_DENIED", async () => {
    await expect(defragment(node)).rejects.toMatchObject({ code: status.PERMISSION_DENIED });
  });

  it("defragments the node's own member and says how its database shrank; another within a minute is refused", async () => {
    etcdNode = await testNode("node-management");
    member = await runTestMember(etcdNode, { bootstrap: true });
    etcdSocket = member.status.clientSocket;
    // Space to give back: 4 MiB written, deleted, and the history compacted.
    const client = memberClient(etcdSocket);
    let memberId: string;
    try {
      const value = "x".repeat(64 * 1024);
      for (let i = 0; i < 64; i++) await client.put(`defrag-${i}`).value(value);
      const deleted = await client.delete().prefix("defrag-");
      await client.kv.compact({ revision: deleted.header.revision, physical: true });
      memberId = hexMemberId((await client.maintenance.status()).header.member_id);
    } finally {
      client.close();
    }
    const res = await defragment();
    expect(res.memberId).toBe(memberId);
    expect(res.dbSizeBefore).toBeGreaterThan(4 * 1024 * 1024);
    expect(res.dbSizeAfter).toBeLessThan(res.dbSizeBefore - 2 * 1024 * 1024);
    // One a minute per node (DefragmentGate).
    await expect(defragment()).rejects.toMatchObject({
      code: status.RESOURCE_EXHAUSTED,
      details: expect.stringMatching(/ask again in \d+ s/),
    });
  });
});
