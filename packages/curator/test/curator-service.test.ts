/**
 * The Curator service against a real one-member etcd, over real gRPC on
 * loopback with the curator's mTLS (startLeader of @metropolis/curator/testing).
 */
import { randomBytes } from "node:crypto";
import { status, type ClientReadableStream, type ServiceError } from "@grpc/grpc-js";
import {
  CertificateAuthority,
  nodeIdFromPublicKey,
  tlsMaterial,
  verifyCertificate,
} from "@metropolis/pki";
import { common, curator, priv, protocolVersion } from "@metropolis/proto";
import { bootstrapNodeFinish } from "../src/bootstrap";
import { curatorServer } from "../src/curator-service";
import { WATCH_MAX_PENDING } from "../src/curator-watch";
import { CuratorError } from "../src/errors";
import { nodeKey, registerTicketKey } from "../src/keys";
import { encodeNode } from "../src/node-record";
import { readAllNodes } from "../src/node-watch-streams";
import { readClusterUnlockKey } from "../src/node-secrets";
import { sealRegisterTicket } from "../src/register-ticket";
import {
  newKeyPair,
  startLeader,
  type ClientIdentity,
  type LeaderFixture,
} from "@metropolis/curator/testing";
import { eventually } from "@metropolis/supervisor/testing";

const { CuratorClient, CuratorService } = curator;
type Client = InstanceType<typeof CuratorClient>;

/** A unary call as a promise. */
function rpc<T>(
  start: (callback: (error: ServiceError | null, response?: T) => void) => unknown,
): Promise<T> {
  return new Promise((resolve, reject) =>
    start((error, response) => (error ? reject(error) : resolve(response as T))),
  );
}

/** Collects a server stream's messages; `until` polls them with a deadline. */
class Collected<T> {
  readonly messages: T[] = [];
  error?: ServiceError;
  constructor(readonly stream: ClientReadableStream<T>) {
    stream.on("data", (m: T) => this.messages.push(m));
    stream.on("error", (e: ServiceError) => (this.error = e));
  }
  async until(done: (messages: T[]) => boolean, what: string, timeoutMs = 10_000): Promise<T[]> {
    const deadline = Date.now() + timeoutMs;
    while (!done(this.messages)) {
      if (this.error && this.error.code !== status.CANCELLED) throw this.error;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    return this.messages;
  }
}

const HEARTBEAT_TIMEOUT_MS = 1_500;
let leader: LeaderFixture;
let ticket: Buffer;
let nodeClient: Client;

beforeAll(async () => {
  leader = await startLeader({
    heartbeatTimeoutMs: HEARTBEAT_TIMEOUT_MS,
    services: (ctx) => [[CuratorService, curatorServer(ctx)]],
  });
  // Management.GetRegisterTicket creates the ticket; it is not ours, so write it directly.
  ticket = randomBytes(32);
  const { ctx } = leader;
  await ctx.leadership.commit(
    ctx.leadership
      .txn()
      .then(ctx.kv.put(registerTicketKey).value(sealRegisterTicket(ctx.secrets, ticket))),
  );
  nodeClient = await leader.client(CuratorClient, "node");
}, 30_000);

afterAll(async () => {
  await leader?.stop();
});

const status_ = (code: status) => expect.objectContaining({ code });

describe("watch", () => {
  it("streams one node: its state, then updates from UpdateNodeStatus", async () => {
    const id = leader.firstNode.nodeId;
    const w = new Collected(
      nodeClient.watch({ kind: { $case: "nodeInCluster", nodeInCluster: { nodeId: id } } }),
    );
    const [first] = await w.until((m) => m.length >= 1, "initial state");
    expect(first.nodes).toHaveLength(1);
    expect(first.nodes[0]).toMatchObject({ id, state: common.NodeState.UP });
    expect(first.nodes[0].roles).toMatchObject({ consensusMember: {}, kubernetesController: {} });

    const before = Date.now();
    await rpc((cb) =>
      nodeClient.updateNodeStatus(
        {
          nodeId: id,
          status: common.NodeStatus.fromPartial({ externalAddress: "10.1.2.3", version: "v1" }),
        },
        cb,
      ),
    );
    const messages = await w.until(
      (m) => m.some((x) => x.nodes[0]?.status?.externalAddress === "10.1.2.3"),
      "status update",
    );
    const updated = messages.find((x) => x.nodes[0]?.status?.externalAddress === "10.1.2.3")!
      .nodes[0].status!;
    expect(updated.version).toBe("v1");
    // The leader stamps the update, not the node.
    expect(updated.timestamp!.getTime()).toBeGreaterThanOrEqual(before - 1000);
    w.stream.cancel();
  });

  it("streams all nodes: backlog in chunks, LAST_BACKLOGGED once, then updates and tombstones", async () => {
    const added = [];
    for (let i = 0; i < 55; i++) added.push(await leader.addNode({ state: common.NodeState.NEW }));
    const w = new Collected(
      nodeClient.watch({
        kind: {
          $case: "nodesInCluster",
          nodesInCluster: { resumeFromRevision: 0, resumeEtcdClusterId: "" },
        },
      }),
    );
    const backlog = await w.until(
      (m) => m.some((x) => x.progress === curator.WatchResponse_Progress.LAST_BACKLOGGED),
      "end of backlog",
    );
    expect(backlog.length).toBeGreaterThanOrEqual(2);
    backlog.forEach((m) => expect(m.nodes.length).toBeLessThanOrEqual(50));
    expect(
      backlog.filter((m) => m.progress === curator.WatchResponse_Progress.LAST_BACKLOGGED),
    ).toHaveLength(1);
    expect(backlog[backlog.length - 1].progress).toBe(
      curator.WatchResponse_Progress.LAST_BACKLOGGED,
    );
    const ids = new Set(backlog.flatMap((m) => m.nodes.map((n) => n.id)));
    for (const n of [leader.firstNode, ...added]) expect(ids.has(n.nodeId)).toBe(true);
    const backlogLength = backlog.length;

    const target = added[0].nodeId;
    await leader.updateNode(target, (n) => ({ ...n, labels: new Map([["zone", "a"]]) }));
    await w.until(
      (m) =>
        m
          .slice(backlogLength)
          .some((x) => x.nodes[0]?.id === target && x.nodes[0].labels.get("zone") === "a"),
      "update",
    );
    await leader.deleteNode(target);
    await w.until(
      (m) => m.some((x) => x.nodeTombstones.some((t) => t.nodeId === target)),
      "tombstone",
    );
    for (const n of added.slice(1)) await leader.deleteNode(n.nodeId);
    w.stream.cancel();
  });

  it("resumes a watch of all nodes: only the nodes changed since, and the count that shows a missed deletion", async () => {
    const all = (resumeFromRevision: number, resumeEtcdClusterId = "") =>
      new Collected(
        nodeClient.watch({
          kind: {
            $case: "nodesInCluster",
            nodesInCluster: { resumeFromRevision, resumeEtcdClusterId },
          },
        }),
      );
    const backlogOf = async (w: Collected<curator.WatchResponse>) => {
      const messages = await w.until(
        (m) => m.some((x) => x.progress === curator.WatchResponse_Progress.LAST_BACKLOGGED),
        "end of backlog",
      );
      const last = messages.findIndex(
        (x) => x.progress === curator.WatchResponse_Progress.LAST_BACKLOGGED,
      );
      return { messages: messages.slice(0, last + 1), end: messages[last] };
    };
    const [a, b, c] = [await leader.addNode(), await leader.addNode(), await leader.addNode()];
    const labelled = (id: string, value: string) =>
      leader.updateNode(id, (n) => ({ ...n, labels: new Map([["zone", value]]) }));
    try {
      const first = all(0);
      const full = await backlogOf(first);
      expect(full.end.revision).toBeGreaterThan(0);
      expect(full.messages.every((m) => !m.resumed)).toBe(true);
      const total = full.messages.reduce((n, m) => n + m.nodes.length, 0);
      expect(full.end.nodeCount).toBe(total);

      // A change carries its revision: the client resumes from the last it applied.
      await labelled(a.nodeId, "1");
      const [change] = await first
        .until((m) => m.length > full.messages.length, "the change of a")
        .then((m) => m.slice(full.messages.length));
      expect(change.nodes.map((n) => n.id)).toEqual([a.nodeId]);
      expect(change.revision).toBeGreaterThan(full.end.revision);
      expect(change.etcdClusterId).toBe(full.end.etcdClusterId);
      first.stream.cancel();

      // Away: b changes. Back: a (of the revision resumed from) and b, nothing else.
      await labelled(b.nodeId, "2");
      const second = all(change.revision, change.etcdClusterId);
      const resumed = await backlogOf(second);
      expect(resumed.messages.every((m) => m.resumed)).toBe(true);
      expect(resumed.messages.flatMap((m) => m.nodes.map((n) => n.id)).sort()).toEqual(
        [a.nodeId, b.nodeId].sort(),
      );
      expect(resumed.end.nodeCount).toBe(total);
      expect(resumed.end.revision).toBeGreaterThan(change.revision);
      // And the changes follow as before.
      await labelled(c.nodeId, "3");
      const cChanged = (
        await second.until(
          (m) => m.slice(resumed.messages.length).some((x) => x.nodes[0]?.id === c.nodeId),
          "the change of c",
        )
      ).find((x) => x.nodes[0]?.id === c.nodeId && !x.resumed);
      second.stream.cancel();

      // Away: c is deleted. The resumed backlog has no tombstone, but one node less counted.
      await leader.deleteNode(c.nodeId);
      const third = all(cChanged?.revision ?? 0, cChanged?.etcdClusterId);
      const afterDelete = await backlogOf(third);
      expect(afterDelete.messages.flatMap((m) => m.nodes)).toEqual([]);
      expect(afterDelete.end.resumed).toBe(true);
      expect(afterDelete.end.nodeCount).toBe(total - 1);
      third.stream.cancel();

      // A revision this leader has not reached: the full backlog, not marked resumed.
      const future = all(afterDelete.end.revision + 1_000_000, afterDelete.end.etcdClusterId);
      const fresh = await backlogOf(future);
      expect(fresh.end.resumed).toBe(false);
      expect(fresh.messages.reduce((n, m) => n + m.nodes.length, 0)).toBe(total - 1);
      future.stream.cancel();

      const negative = all(-1);
      await expect(negative.until(() => false, "error", 5000)).rejects.toEqual(
        status_(status.INVALID_ARGUMENT),
      );
    } finally {
      for (const n of [a, b]) await leader.deleteNode(n.nodeId);
    }
  });

  it("resumes only a token of its own etcd cluster: another cluster's ID, or none, gets the full backlog", async () => {
    // A cluster restored from a backup is a new etcd cluster whose revisions
    // restart at the snapshot's (etcd 3.4 cannot bump them): a revision of
    // the old cluster that the new one has passed names a different history.
    const watchFrom = (resumeFromRevision: number, resumeEtcdClusterId: string) =>
      new Collected(
        nodeClient.watch({
          kind: {
            $case: "nodesInCluster",
            nodesInCluster: { resumeFromRevision, resumeEtcdClusterId },
          },
        }),
      );
    const backlogOf = async (w: Collected<curator.WatchResponse>) => {
      try {
        const messages = await w.until(
          (m) => m.some((x) => x.progress === curator.WatchResponse_Progress.LAST_BACKLOGGED),
          "end of backlog",
        );
        const last = messages.findIndex(
          (x) => x.progress === curator.WatchResponse_Progress.LAST_BACKLOGGED,
        );
        const head = messages.slice(0, last + 1);
        return {
          end: messages[last],
          ids: head.flatMap((m) => m.nodes.map((n) => n.id)).sort(),
          resumed: head.map((m) => m.resumed),
        };
      } finally {
        w.stream.cancel();
      }
    };
    // The leader's etcd cluster, as any etcd response header names it.
    const { header } = await leader.ctx.kv.get("any").exec();
    const own = header.cluster_id;
    expect(own).toMatch(/^[1-9][0-9]*$/);
    const [a, b] = [await leader.addNode(), await leader.addNode()];
    try {
      const full = await backlogOf(watchFrom(0, ""));
      expect(full.end.etcdClusterId).toBe(own);
      expect(full.resumed.every((r) => !r)).toBe(true);
      await leader.updateNode(b.nodeId, (n) => ({ ...n, labels: new Map([["zone", "b"]]) }));
      const changed = await leader.ctx.nodes.find(b.nodeId);
      const reached = Number(changed?.modRevision);
      expect(reached).toBeGreaterThan(full.end.revision);
      // Another etcd cluster's token, of a revision this one has reached: a
      // restored cluster's leader sees such a token from a node of the old one.
      const other = (BigInt(own) ^ 1n).toString();
      for (const clusterId of [other, ""]) {
        const fresh = await backlogOf(watchFrom(reached, clusterId));
        expect({ clusterId, resumed: fresh.resumed.some((r) => r) }).toEqual({
          clusterId,
          resumed: false,
        });
        expect(fresh.ids).toEqual(full.ids);
        expect(fresh.end.nodeCount).toBe(full.ids.length);
        expect(fresh.end.etcdClusterId).toBe(own);
      }
      // Its own: resumed, only what changed at or after the revision.
      const resumed = await backlogOf(watchFrom(reached, own));
      expect(resumed.resumed.every((r) => r)).toBe(true);
      expect(resumed.ids).toEqual([b.nodeId]);
      expect(resumed.end.etcdClusterId).toBe(own);
      // The leader's read of etcd, used while its copy of the records is not
      // trusted, names the same cluster.
      expect((await readAllNodes(leader.ctx, "test")).clusterId).toBe(own);
    } finally {
      for (const n of [a, b]) await leader.deleteNode(n.nodeId);
    }
  });

  it("ends the watch of a client that stopped reading with RESOURCE_EXHAUSTED; a new watch works", async () => {
    const { ctx } = leader;
    const all = {
      kind: {
        $case: "nodesInCluster" as const,
        nodesInCluster: { resumeFromRevision: 0, resumeEtcdClusterId: "" },
      },
    };
    const lastBacklogged = (m: curator.WatchResponse[]) =>
      m.some((x) => x.progress === curator.WatchResponse_Progress.LAST_BACKLOGGED);
    const w = new Collected(nodeClient.watch(all));
    await w.until(lastBacklogged, "end of backlog");
    // grpc-js then stops reading the HTTP/2 stream, so once the client's
    // buffers and flow-control window (about 100 KiB) are full, changes pile up
    // on the leader.
    w.stream.pause();
    const received = w.messages.length;

    // Raw records, written directly: transactions of 100 puts (etcd allows 128)
    // are much faster than one call a change. About 3 KiB of labels each, so
    // the client's buffers hold few of them: twice the bound is plenty.
    const ids = Array.from({ length: 100 }, () => `metropolis-${randomBytes(16).toString("hex")}`);
    const labels = new Map(
      Array.from({ length: 32 }, (_, i) => [`example.com/label-${i}`, "v".repeat(63)]),
    );
    const rounds = Math.ceil((2 * WATCH_MAX_PENDING) / ids.length);
    try {
      for (let round = 0; round < rounds; round++) {
        const record = encodeNode(
          priv.Node.fromPartial({
            state: common.NodeState.NEW,
            labels: new Map([...labels, ["round", String(round)]]),
          }),
        );
        await ctx.leadership.commit(
          ctx.leadership.txn().then(...ids.map((id) => ctx.kv.put(nodeKey(id)).value(record))),
        );
      }
      w.stream.resume();
      await expect(w.until(() => false, "the watch to end")).rejects.toEqual(
        expect.objectContaining({
          code: status.RESOURCE_EXHAUSTED,
          details: expect.stringMatching(
            /^watcher fell behind: \d+ messages not yet read by the client; watch again$/,
          ),
        }),
      );
      // What was pending still arrived, but not every later change.
      expect(w.messages.length - received).toBeGreaterThan(WATCH_MAX_PENDING);
      expect(w.messages.length - received).toBeLessThan(rounds * ids.length);

      const again = new Collected(nodeClient.watch(all));
      await again.until(lastBacklogged, "end of the new watch's backlog");
      again.stream.cancel();
    } finally {
      w.stream.cancel();
      await ctx.leadership.commit(
        ctx.leadership.txn().then(...ids.map((id) => ctx.kv.delete().key(nodeKey(id)))),
      );
    }
  });

  it("rejects a request without a kind and a malformed node ID", async () => {
    const empty = new Collected(nodeClient.watch({}));
    await expect(empty.until(() => false, "error", 5000)).rejects.toEqual(
      status_(status.INVALID_ARGUMENT),
    );
    const bad = new Collected(
      nodeClient.watch({ kind: { $case: "nodeInCluster", nodeInCluster: { nodeId: "x" } } }),
    );
    await expect(bad.until(() => false, "error", 5000)).rejects.toEqual(
      status_(status.INVALID_ARGUMENT),
    );
  });
});

describe("UpdateNodeStatus", () => {
  it("refuses another node's status and a bad IP", async () => {
    const other = await leader.addNode();
    const s = common.NodeStatus.fromPartial({ externalAddress: "10.0.0.1" });
    await expect(
      rpc((cb) => nodeClient.updateNodeStatus({ nodeId: other.nodeId, status: s }, cb)),
    ).rejects.toEqual(status_(status.PERMISSION_DENIED));
    const id = leader.firstNode.nodeId;
    for (const externalAddress of ["", "not-an-ip", "10.0.0.256"]) {
      const bad = common.NodeStatus.fromPartial({ externalAddress });
      await expect(
        rpc((cb) => nodeClient.updateNodeStatus({ nodeId: id, status: bad }, cb)),
      ).rejects.toEqual(status_(status.INVALID_ARGUMENT));
    }
    await expect(rpc((cb) => nodeClient.updateNodeStatus({ nodeId: id }, cb))).rejects.toEqual(
      status_(status.INVALID_ARGUMENT),
    );
    await leader.deleteNode(other.nodeId);
  });

  // Issue 11's hijack: an approved node without roles announced a curator of its
  // own, and every node's directory worker listed it first.
  it("refuses running_curator from a node that is not a consensus member", async () => {
    const rogue = await leader.addNode();
    const asRogue = await leader.client(CuratorClient, { node: rogue });
    const claim = common.NodeStatus.fromPartial({
      externalAddress: "127.0.0.77",
      runningCurator: { port: 17835 },
    });
    await expect(
      rpc((cb) => asRogue.updateNodeStatus({ nodeId: rogue.nodeId, status: claim }, cb)),
    ).rejects.toEqual(
      expect.objectContaining({
        code: status.PERMISSION_DENIED,
        details: expect.stringMatching(/not a consensus member/),
      }),
    );
    expect((await leader.getNode(rogue.nodeId))?.status).toBeUndefined();
    // The same status without the curator is the node's to report.
    const plain = common.NodeStatus.fromPartial({ externalAddress: "127.0.0.77" });
    await rpc((cb) => asRogue.updateNodeStatus({ nodeId: rogue.nodeId, status: plain }, cb));
    expect((await leader.getNode(rogue.nodeId))?.status?.externalAddress).toBe("127.0.0.77");

    // A consensus member may say it runs one.
    const member = await leader.addNode({
      roles: { consensusMember: common.NodeRoles_ConsensusMember.create() },
    });
    const asMember = await leader.client(CuratorClient, { node: member });
    const serving = common.NodeStatus.fromPartial({
      externalAddress: "127.0.0.78",
      runningCurator: { port: 7835 },
    });
    await rpc((cb) => asMember.updateNodeStatus({ nodeId: member.nodeId, status: serving }, cb));
    expect((await leader.getNode(member.nodeId))?.status?.runningCurator?.port).toBe(7835);
    await leader.deleteNode(rogue.nodeId);
    await leader.deleteNode(member.nodeId);
  });

  it("refuses an external address another node holds, until that node gives it up", async () => {
    const [a, b] = [await leader.addNode(), await leader.addNode()];
    const [asA, asB] = [
      await leader.client(CuratorClient, { node: a }),
      await leader.client(CuratorClient, { node: b }),
    ];
    const report = (client: Client, nodeId: string, externalAddress: string) =>
      rpc((cb) =>
        client.updateNodeStatus(
          { nodeId, status: common.NodeStatus.fromPartial({ externalAddress }) },
          cb,
        ),
      );
    await report(asA, a.nodeId, "fd00::1");
    // Again, and under another spelling of the same address: still its own.
    await report(asA, a.nodeId, "fd00:0:0::1");
    await expect(report(asB, b.nodeId, "fd00:0::0:1")).rejects.toEqual(
      expect.objectContaining({
        code: status.ALREADY_EXISTS,
        details: expect.stringContaining(`held by node ${a.nodeId}`),
      }),
    );
    expect((await leader.getNode(b.nodeId))?.status).toBeUndefined();
    // A moves: its old address is free for B.
    await report(asA, a.nodeId, "fd00::2");
    await report(asB, b.nodeId, "fd00::1");
    await expect(report(asA, a.nodeId, "fd00::1")).rejects.toEqual(status_(status.ALREADY_EXISTS));
    await leader.deleteNode(a.nodeId);
    await leader.deleteNode(b.nodeId);
  });
});

describe("registration", () => {
  it("goes NEW → STANDBY → UP, and the node can then join with its join key", async () => {
    const key = newKeyPair();
    const join = newKeyPair();
    const cuk = randomBytes(32);
    const eph = await leader.client(CuratorClient, { ephemeral: key.privateKey });
    const register = () =>
      rpc<curator.RegisterNodeResponse>((cb) =>
        eph.registerNode(
          {
            registerTicket: ticket,
            joinKey: join.publicKey,
            labels: new Map([["example.com/rack", "r1"]]),
            protocolVersion,
          },
          cb,
        ),
      );
    const commit = () =>
      rpc<curator.CommitNodeResponse>((cb) => eph.commitNode({ clusterUnlockKey: cuk }, cb));

    expect(await register()).toEqual({ storagePolicy: common.StoragePolicy.ENCRYPTED });
    const id = nodeIdFromPublicKey(key.publicKey);
    expect((await leader.getNode(id))?.state).toBe(common.NodeState.NEW);
    expect((await leader.getNode(id))?.labels).toEqual(new Map([["example.com/rack", "r1"]]));
    await register(); // a retry while NEW is fine
    await expect(commit()).rejects.toEqual(status_(status.PERMISSION_DENIED));

    // Management.ApproveNode is not ours: approve directly.
    await leader.updateNode(id, (n) => ({ ...n, state: common.NodeState.STANDBY }));
    await expect(register()).rejects.toEqual(status_(status.FAILED_PRECONDITION));
    const committed = await commit();
    expect(committed.caCertificate).toEqual(leader.caCertificate);
    const cert = await verifyCertificate(committed.nodeCertificate, leader.caCertificate);
    expect(cert.commonName).toBe(id);
    expect(cert.extendedKeyUsage).toEqual(expect.arrayContaining(["serverAuth", "clientAuth"]));
    const stored = (await leader.getNode(id))!;
    expect(stored.state).toBe(common.NodeState.UP);
    expect(await readClusterUnlockKey(leader.ctx.kv, leader.ctx.secrets, id)).toEqual(cuk);
    // Committing again (a lost answer) returns the same certificate.
    expect((await commit()).nodeCertificate).toEqual(committed.nodeCertificate);
    // …but not for another unlock key.
    await expect(
      rpc((cb) => eph.commitNode({ clusterUnlockKey: randomBytes(32) }, cb)),
    ).rejects.toEqual(status_(status.FAILED_PRECONDITION));
    await expect(register()).rejects.toEqual(status_(status.FAILED_PRECONDITION));

    const joiner = await leader.client(CuratorClient, { ephemeral: join.privateKey });
    for (let i = 0; i < 2; i++) {
      const joined = await rpc<curator.JoinNodeResponse>((cb) =>
        joiner.joinNode({ protocolVersion }, cb),
      );
      expect(Buffer.from(joined.clusterUnlockKey)).toEqual(cuk);
    }

    // The new certificate is a working node identity.
    const asNode = await leader.client(CuratorClient, {
      node: { privateKey: key.privateKey, certificate: committed.nodeCertificate },
    });
    await rpc((cb) =>
      asNode.updateNodeStatus(
        { nodeId: id, status: common.NodeStatus.fromPartial({ externalAddress: "::1" }) },
        cb,
      ),
    );
    expect((await leader.getNode(id))?.status?.externalAddress).toBe("::1");
  });

  it("refuses a wrong ticket, bad join keys and labels", async () => {
    const eph = await leader.client(CuratorClient, { ephemeral: newKeyPair().privateKey });
    const joinKey = newKeyPair().publicKey;
    const cases: Array<[Partial<curator.RegisterNodeRequest>, status]> = [
      [{ registerTicket: randomBytes(32) }, status.PERMISSION_DENIED],
      [{ registerTicket: Buffer.alloc(0) }, status.PERMISSION_DENIED],
      [{ joinKey: randomBytes(31) }, status.INVALID_ARGUMENT],
      [{ labels: new Map([["-bad", "x"]]) }, status.INVALID_ARGUMENT],
      [{ labels: new Map([["ok", "bad value"]]) }, status.INVALID_ARGUMENT],
      [
        { labels: new Map(Array.from({ length: 129 }, (_, i) => [`l${i}`, "v"])) },
        status.INVALID_ARGUMENT,
      ],
    ];
    for (const [override, code] of cases) {
      const req = curator.RegisterNodeRequest.fromPartial({
        registerTicket: ticket,
        joinKey,
        ...override,
      });
      await expect(rpc((cb) => eph.registerNode(req, cb))).rejects.toEqual(status_(code));
    }
  });

  it("refuses a node that speaks a wire protocol it does not serve, naming both versions; takes an older node's 0 as 1", async () => {
    const refused = expect.objectContaining({
      code: status.FAILED_PRECONDITION,
      details: expect.stringMatching(
        new RegExp(
          `speaks wire protocol version ${protocolVersion + 1}; this curator serves version ${protocolVersion}: upgrade the cluster's curators first`,
        ),
      ),
    });
    const key = newKeyPair();
    const eph = await leader.client(CuratorClient, { ephemeral: key.privateKey });
    const register = (sent: number) =>
      rpc((cb) =>
        eph.registerNode(
          curator.RegisterNodeRequest.fromPartial({
            registerTicket: ticket,
            joinKey: newKeyPair().publicKey,
            protocolVersion: sent,
          }),
          cb,
        ),
      );
    await expect(register(protocolVersion + 1)).rejects.toEqual(refused);
    // Refused before anything was written.
    expect(await leader.getNode(nodeIdFromPublicKey(key.publicKey))).toBeUndefined();
    // A node older than the field sends 0: it spoke version 1, which is served.
    await expect(register(0)).resolves.toBeDefined();
    await leader.deleteNode(nodeIdFromPublicKey(key.publicKey));

    const up = await leader.addNode({ state: common.NodeState.UP });
    const joiner = await leader.client(CuratorClient, { ephemeral: up.join.privateKey });
    await expect(
      rpc((cb) => joiner.joinNode({ protocolVersion: protocolVersion + 1 }, cb)),
    ).rejects.toEqual(refused);
    await leader.deleteNode(up.nodeId);
  });

  it("CommitNode needs a registered node and a 32-byte unlock key; JoinNode a known join key of an UP node", async () => {
    const eph = await leader.client(CuratorClient, { ephemeral: newKeyPair().privateKey });
    await expect(
      rpc((cb) => eph.commitNode({ clusterUnlockKey: randomBytes(32) }, cb)),
    ).rejects.toEqual(status_(status.NOT_FOUND));
    await expect(
      rpc((cb) => eph.commitNode({ clusterUnlockKey: randomBytes(3) }, cb)),
    ).rejects.toEqual(status_(status.INVALID_ARGUMENT));
    await expect(rpc((cb) => eph.joinNode({ protocolVersion }, cb))).rejects.toEqual(
      status_(status.PERMISSION_DENIED),
    );
    const standby = await leader.addNode({ state: common.NodeState.STANDBY });
    const joiner = await leader.client(CuratorClient, { ephemeral: standby.join.privateKey });
    await expect(rpc((cb) => joiner.joinNode({ protocolVersion }, cb))).rejects.toEqual(
      status_(status.FAILED_PRECONDITION),
    );
    await leader.deleteNode(standby.nodeId);
  });
});

describe("heartbeat", () => {
  it("makes a node HEALTHY while it beats, and HEARTBEAT_TIMEOUT when it stops", async () => {
    const node = await leader.addNode();
    const { heartbeats } = leader.ctx;
    expect(heartbeats.health(node.nodeId)).not.toBe(common.NodeHealth.HEALTHY);
    const client = await leader.client(CuratorClient, { node });
    const stream = client.heartbeat();
    const response = new Promise<curator.HeartbeatResponse>((resolve, reject) => {
      stream.once("data", resolve);
      stream.once("error", reject);
    });
    stream.write({});
    expect((await response).health).toBe(common.NodeHealth.HEALTHY);
    expect(heartbeats.health(node.nodeId)).toBe(common.NodeHealth.HEALTHY);
    const ended = new Promise<void>((resolve) => stream.on("status", () => resolve()));
    stream.end();
    await ended;
    await eventually(
      () => heartbeats.health(node.nodeId) === common.NodeHealth.HEARTBEAT_TIMEOUT,
      "heartbeat timeout",
      { timeoutMs: HEARTBEAT_TIMEOUT_MS * 4 },
    );
    await leader.deleteNode(node.nodeId);
  });
});

describe("GetConsensusStatus", () => {
  it("lists the etcd members by node ID", async () => {
    const res = await rpc<curator.GetConsensusStatusResponse>((cb) =>
      nodeClient.getConsensusStatus({}, cb),
    );
    expect(res.members).toEqual([
      expect.objectContaining({
        nodeId: leader.firstNode.nodeId,
        status: common.ConsensusMember_Status.VOTER,
      }),
    ]);
  });
});

describe("authorization", () => {
  /** Each RPC, reduced to "its status code" (OK = 0). */
  const calls: Record<string, (c: Client) => Promise<unknown>> = {
    watch: (c) =>
      new Collected(
        c.watch({
          kind: {
            $case: "nodesInCluster",
            nodesInCluster: { resumeFromRevision: 0, resumeEtcdClusterId: "" },
          },
        }),
      ).until(() => false, "error", 5000),
    updateNodeStatus: (c) =>
      rpc((cb) =>
        c.updateNodeStatus(
          {
            nodeId: leader.firstNode.nodeId,
            status: common.NodeStatus.fromPartial({ externalAddress: "10.0.0.9" }),
          },
          cb,
        ),
      ),
    heartbeat: (c) =>
      new Promise((resolve, reject) => {
        const s = c.heartbeat();
        s.once("data", (m) => (resolve(m), s.cancel())).once("error", reject);
        s.write({});
      }),
    registerNode: (c) =>
      rpc((cb) =>
        c.registerNode(
          {
            registerTicket: ticket,
            joinKey: newKeyPair().publicKey,
            labels: new Map(),
            protocolVersion,
          },
          cb,
        ),
      ),
    commitNode: (c) => rpc((cb) => c.commitNode({ clusterUnlockKey: randomBytes(32) }, cb)),
    joinNode: (c) => rpc((cb) => c.joinNode({ protocolVersion }, cb)),
    getConsensusStatus: (c) => rpc((cb) => c.getConsensusStatus({}, cb)),
  };
  const nodeOnly = ["watch", "updateNodeStatus", "heartbeat", "getConsensusStatus"];

  it.each<[string, ClientIdentity | "foreign", (method: string) => status | "allowed"]>([
    ["owner", "owner", () => status.PERMISSION_DENIED],
    ["no certificate", "none", () => status.UNAUTHENTICATED],
    ["another cluster's node", "foreign", () => status.UNAUTHENTICATED],
    ["a node", "node", (m) => (nodeOnly.includes(m) ? "allowed" : status.PERMISSION_DENIED)],
  ])("%s", async (_name, identity, expected) => {
    const client =
      identity === "foreign"
        ? await leader.client(CuratorClient, { tls: await foreignNode() })
        : await leader.client(CuratorClient, identity);
    for (const [method, call] of Object.entries(calls)) {
      const want = expected(method);
      if (want === "allowed") {
        // Watch never returns while allowed; its first message is enough.
        if (method === "watch") continue;
        await expect(call(client)).resolves.toBeDefined();
      } else {
        await expect(call(client)).rejects.toEqual(status_(want));
      }
    }
  });

  it("a deleted node, whose certificate still verifies, is refused every node RPC", async () => {
    const node = await leader.addNode();
    const client = await leader.client(CuratorClient, { node });
    await expect(calls.getConsensusStatus(client)).resolves.toBeDefined();
    await leader.deleteNode(node.nodeId);
    for (const method of nodeOnly) {
      const error = await calls[method](client).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect([method, (error as ServiceError).code]).toEqual([method, status.PERMISSION_DENIED]);
    }
  });

  it("an ephemeral certificate may only register, commit and join", async () => {
    const client = await leader.client(CuratorClient, { ephemeral: newKeyPair().privateKey });
    for (const method of nodeOnly)
      await expect(calls[method](client)).rejects.toEqual(status_(status.PERMISSION_DENIED));
    await expect(calls.registerNode(client)).resolves.toBeDefined();
    await expect(calls.commitNode(client)).rejects.toEqual(status_(status.PERMISSION_DENIED)); // not approved yet
    await expect(calls.joinNode(client)).rejects.toEqual(status_(status.PERMISSION_DENIED)); // not a join key
  });
});

describe("bootstrapNodeFinish", () => {
  it("is idempotent for the same inputs and refuses different ones", async () => {
    const { firstNode, owner, ctx } = leader;
    const params = {
      nodePublicKey: firstNode.publicKey,
      joinPublicKey: firstNode.join.publicKey,
      clusterUnlockKey: firstNode.clusterUnlockKey,
      ownerPublicKey: owner.publicKey,
    };
    const again = await bootstrapNodeFinish(ctx, params);
    expect(again.created).toBe(false);
    expect(again.nodeCertificate).toEqual(firstNode.certificate);
    expect(again.caCertificate).toEqual(leader.caCertificate);
    await expect(
      bootstrapNodeFinish(ctx, { ...params, clusterUnlockKey: randomBytes(32) }),
    ).rejects.toBeInstanceOf(CuratorError);
    await expect(
      bootstrapNodeFinish(ctx, { ...params, ownerPublicKey: newKeyPair().publicKey }),
    ).rejects.toMatchObject({
      code: status.FAILED_PRECONDITION,
    });
    await expect(
      bootstrapNodeFinish(ctx, { ...params, joinPublicKey: randomBytes(5) }),
    ).rejects.toMatchObject({
      code: status.INVALID_ARGUMENT,
    });
  });
});

// Last: it ends this leader's leadership.
describe("lost leadership", () => {
  it("answers writes with UNAVAILABLE once the election key is gone", async () => {
    await leader.candidacy.resign();
    await expect(
      rpc((cb) =>
        nodeClient.updateNodeStatus(
          {
            nodeId: leader.firstNode.nodeId,
            status: common.NodeStatus.fromPartial({ externalAddress: "10.0.0.7" }),
          },
          cb,
        ),
      ),
    ).rejects.toEqual(status_(status.UNAVAILABLE));
    const eph = await leader.client(CuratorClient, { ephemeral: newKeyPair().privateKey });
    await expect(
      rpc((cb) =>
        eph.registerNode(
          {
            registerTicket: ticket,
            joinKey: newKeyPair().publicKey,
            labels: new Map(),
            protocolVersion,
          },
          cb,
        ),
      ),
    ).rejects.toEqual(status_(status.UNAVAILABLE));
  });
});

/** TLS material of a node certificate from a CA that is not this cluster's. */
async function foreignNode(): Promise<{ cert: string; key: string }> {
  const ca = await CertificateAuthority.create();
  const key = newKeyPair();
  const certificate = await ca.issueNodeCertificate(key.publicKey);
  return tlsMaterial({ certificate, privateKey: key.privateKey, ca: ca.certificate });
}
