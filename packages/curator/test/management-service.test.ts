/**
 * The Management service against a real leader: one-member etcd, a
 * bootstrapped cluster, real mTLS (startLeader of @metropolis/curator/testing).
 */
import { status, type ServiceError } from "@grpc/grpc-js";
import { parseCertificate } from "@metropolis/pki";
import { api, common } from "@metropolis/proto";
import { LostLeadershipError } from "../src/errors";
import { joinKeyKey } from "../src/keys";
import { maxLabelsPerNode } from "../src/labels";
import type { LeaderContext } from "../src/leader-context";
import { managementServer, managementService } from "../src/management-service";
import { startLeader, type ClientIdentity, type LeaderFixture } from "@metropolis/curator/testing";
import { eventually } from "@metropolis/supervisor/testing";
import { expectCode } from "./expect-code";

type Callback<Res> = (err: ServiceError | null, res?: Res) => void;

/** Promise-returning wrappers of a Management client's calls. */
function promised(client: api.ManagementClient) {
  const call = <Res>(f: (cb: Callback<Res>) => unknown) =>
    new Promise<Res>((resolve, reject) =>
      f((err, res) => (err ? reject(err) : resolve(res as Res))),
    );
  return {
    getRegisterTicket: () =>
      call<api.GetRegisterTicketResponse>((cb) => client.getRegisterTicket({}, cb)),
    getClusterInfo: () => call<api.GetClusterInfoResponse>((cb) => client.getClusterInfo({}, cb)),
    getClusterConsensus: () =>
      call<api.GetClusterConsensusResponse>((cb) => client.getClusterConsensus({}, cb)),
    getNodes: (req: Partial<api.GetNodesRequest> = {}) =>
      call<api.GetNodesResponse>((cb) => client.getNodes(api.GetNodesRequest.fromPartial(req), cb)),
    approveNode: (req: api.ApproveNodeRequest) =>
      call<api.ApproveNodeResponse>((cb) => client.approveNode(req, cb)),
    updateNodeRoles: (req: api.UpdateNodeRolesRequest) =>
      call<api.UpdateNodeRolesResponse>((cb) => client.updateNodeRoles(req, cb)),
    updateNodeLabels: (req: Partial<api.UpdateNodeLabelsRequest>) =>
      call<api.UpdateNodeLabelsResponse>((cb) =>
        client.updateNodeLabels(api.UpdateNodeLabelsRequest.fromPartial(req), cb),
      ),
    deleteNode: (req: Partial<api.DeleteNodeRequest>) =>
      call<api.DeleteNodeResponse>((cb) =>
        client.deleteNode(api.DeleteNodeRequest.fromPartial(req), cb),
      ),
  };
}
type Management = ReturnType<typeof promised>;

const byId = (id: string) => ({ $case: "id" as const, id });

let leader: LeaderFixture;
let owner: Management;
/** Nodes removed from consensus through the service's context. */
const removedFromConsensus: string[] = [];

async function clientAs(identity: ClientIdentity): Promise<Management> {
  return promised(await leader.client(api.ManagementClient, identity));
}

beforeAll(async () => {
  leader = await startLeader({
    services: (ctx) => {
      const testCtx: LeaderContext = {
        ...ctx,
        consensus: {
          ...ctx.consensus,
          removeNode: (nodeId, address, signal) => {
            removedFromConsensus.push(nodeId);
            return ctx.consensus.removeNode(nodeId, address, signal);
          },
        },
      };
      return [[managementService, managementServer(testCtx)]];
    },
  });
  owner = await clientAs("owner");
}, 30_000);

afterAll(async () => {
  await leader?.stop();
});

describe("GetRegisterTicket", () => {
  it("creates one ticket under concurrent first calls and keeps it", async () => {
    const first = await Promise.all(Array.from({ length: 5 }, () => owner.getRegisterTicket()));
    expect(first[0].ticket).toHaveLength(32);
    for (const res of first) expect(res.ticket.equals(first[0].ticket)).toBe(true);
    const later = await owner.getRegisterTicket();
    expect(later.ticket.equals(first[0].ticket)).toBe(true);
  });
});

describe("GetClusterInfo", () => {
  it("lists UP nodes with their addresses, the CA and the configuration", async () => {
    const up = await leader.addNode();
    await leader.updateNode(up.nodeId, (n) => ({
      ...n,
      status: { externalAddress: "10.1.2.3", version: "", bootId: "", protocolVersion: 1 },
    }));
    const fresh = await leader.addNode({ state: common.NodeState.NEW });
    const info = await owner.getClusterInfo();
    const nodes = info.clusterDirectory?.nodes ?? [];
    const ids = nodes.map((n) => n.id);
    expect(ids).toEqual(expect.arrayContaining([leader.firstNode.nodeId, up.nodeId]));
    expect(ids).not.toContain(fresh.nodeId);
    const listed = nodes.find((n) => n.id === up.nodeId)!;
    expect(listed.publicKey.equals(up.publicKey)).toBe(true);
    expect(listed.addresses).toEqual([{ host: "10.1.2.3" }]);
    expect(info.caCertificate.equals(leader.caCertificate)).toBe(true);
    expect(info.clusterConfiguration?.storagePolicy).not.toBe(common.StoragePolicy.UNSPECIFIED);
  });
});

describe("GetClusterConsensus", () => {
  const Status = common.ConsensusMember_Status;
  const Reachability = common.ConsensusMember_Reachability;

  it("reports the etcd voter and learners, whose curators run, the raft and curator leaders with their terms, and the fault tolerance", async () => {
    await leader.updateNode(leader.firstNode.nodeId, (n) => ({
      ...n,
      status: {
        externalAddress: "127.0.0.1",
        version: "",
        bootId: "",
        protocolVersion: 1,
        runningCurator: { port: 7835 },
      },
    }));
    const before = await owner.getClusterConsensus();
    expect(before.members).toEqual([
      {
        nodeId: leader.firstNode.nodeId,
        memberId: expect.stringMatching(/^[0-9a-f]+$/),
        status: Status.VOTER,
        curatorRunning: true,
        raftLeader: true,
        reachability: Reachability.REACHABLE,
      },
    ]);
    // The one member leads raft: its ID in hex, as etcdctl prints it.
    const own = await leader.ctx.consensus.raftStatus();
    expect(before.raft).toEqual({ leaderMemberId: own.memberId, term: own.raftTerm });
    expect(before.members[0].memberId).toBe(own.memberId);
    expect(before.faultTolerance).toEqual({
      voters: 1,
      learners: 0,
      quorum: 1,
      tolerates: 0,
      unreachableVoters: 0,
    });
    const self = leader.ctx.self;
    expect(before.leader).toEqual({
      nodeId: leader.firstNode.nodeId,
      host: self.host,
      port: self.port,
      term: Number(leader.candidacy.createRevision),
    });
    expect(before.leader?.term).toBeGreaterThan(0);

    // A new consensus member is a learner until it catches up; it has no name until it starts.
    const n = await leader.addNode();
    await leader.updateNode(n.nodeId, (node) => ({
      ...node,
      status: { externalAddress: "127.0.0.10", version: "", bootId: "", protocolVersion: 1 },
    }));
    await owner.updateNodeRoles({ node: byId(n.nodeId), consensusMember: true });
    try {
      const after = await owner.getClusterConsensus();
      expect(after.members).toHaveLength(2);
      const learner = after.members.find((m) => m.memberId !== before.members[0].memberId);
      expect(learner).toEqual({
        nodeId: "",
        memberId: expect.stringMatching(/^[0-9a-f]+$/),
        status: Status.LEARNER,
        curatorRunning: false,
        raftLeader: false,
        // Never started: the leader's member has no raft stream with it.
        reachability: Reachability.UNREACHABLE,
      });
      expect(after.leader).toEqual(before.leader);
      expect(after.raft).toEqual(before.raft);
      // A learner does not vote: one voter is still not fault tolerant.
      expect(after.faultTolerance).toEqual({
        voters: 1,
        learners: 1,
        quorum: 1,
        tolerates: 0,
        unreachableVoters: 0,
      });
    } finally {
      await owner.updateNodeRoles({ node: byId(n.nodeId), consensusMember: false });
    }
  });
});

describe("WatchClusterConsensus", () => {
  /** The first node's status, with or without a running curator. */
  const curatorRuns = (running: boolean) =>
    leader.updateNode(leader.firstNode.nodeId, (n) => ({
      ...n,
      status: {
        externalAddress: "127.0.0.1",
        version: "",
        bootId: "",
        protocolVersion: 1,
        ...(running ? { runningCurator: { port: 7835 } } : {}),
      },
    }));

  it("sends the consensus first, then again each time it changes, to every stream", async () => {
    await curatorRuns(true);
    const client = await leader.client(api.ManagementClient, "owner");
    const streams = [client.watchClusterConsensus({}), client.watchClusterConsensus({})];
    const received = streams.map((stream) => {
      const messages: api.GetClusterConsensusResponse[] = [];
      stream.on("data", (m: api.WatchClusterConsensusResponse) => {
        if (m.consensus) messages.push(m.consensus);
      });
      stream.on("error", () => undefined); // cancelled at the end
      return messages;
    });
    try {
      await eventually(() => received.every((m) => m.length === 1), "both first messages");
      const answered = await owner.getClusterConsensus();
      for (const messages of received) expect(messages[0]).toEqual(answered);

      // The first node's curator stops: each stream is told, once.
      await curatorRuns(false);
      await eventually(() => received.every((m) => m.length === 2), "the change on both streams");
      for (const messages of received) {
        expect(messages[1].members[0].curatorRunning).toBe(false);
        expect(messages[1].leader).toEqual(answered.leader);
      }
      await curatorRuns(true);
      await eventually(() => received.every((m) => m.length === 3), "the change back");
      for (const messages of received) expect(messages[2]).toEqual(answered);
    } finally {
      for (const stream of streams) stream.cancel();
      client.close();
    }
  });
});

describe("GetNodes", () => {
  it("reports state, roles, labels and health, and filters by all criteria", async () => {
    const a = await leader.addNode({
      labels: new Map([
        ["zone", "a"],
        ["tier", "db"],
      ]),
      roles: { kubernetesWorker: {} },
    });
    const b = await leader.addNode({
      state: common.NodeState.NEW,
      labels: new Map([["zone", "a"]]),
    });
    leader.ctx.heartbeats.beat(a.nodeId);

    const all = (await owner.getNodes()).nodes;
    const nodeA = all.find((n) => n.id === a.nodeId)!;
    expect(nodeA.state).toBe(common.NodeState.UP);
    expect(nodeA.pubkey.equals(a.publicKey)).toBe(true);
    expect(nodeA.labels).toEqual(
      new Map([
        ["zone", "a"],
        ["tier", "db"],
      ]),
    );
    expect(nodeA.roles?.kubernetesWorker).toBeDefined();
    expect(nodeA.health).toBe(common.NodeHealth.HEALTHY);
    expect(nodeA.timeSinceHeartbeatMs).toBeGreaterThanOrEqual(0);
    const nodeB = all.find((n) => n.id === b.nodeId)!;
    // Never heard from: UNKNOWN, or HEARTBEAT_TIMEOUT once the leader is older than the timeout.
    expect([common.NodeHealth.UNKNOWN, common.NodeHealth.HEARTBEAT_TIMEOUT]).toContain(
      nodeB.health,
    );
    expect(nodeB.timeSinceHeartbeatMs).toBeUndefined();

    const ids = async (req: Partial<api.GetNodesRequest>) =>
      (await owner.getNodes(req)).nodes.map((n) => n.id).sort();
    expect(await ids({ labels: new Map([["zone", "a"]]) })).toEqual([a.nodeId, b.nodeId].sort());
    expect(await ids({ labels: new Map([["zone", "a"]]), states: [common.NodeState.NEW] })).toEqual(
      [b.nodeId],
    );
    expect(
      await ids({
        labels: new Map([
          ["zone", "a"],
          ["tier", "db"],
        ]),
      }),
    ).toEqual([a.nodeId]);
    expect(
      await ids({ labels: new Map([["zone", "a"]]), roles: [api.NodeRole.KUBERNETES_WORKER] }),
    ).toEqual([a.nodeId]);
    expect(
      await ids({ roles: [api.NodeRole.CONSENSUS_MEMBER, api.NodeRole.KUBERNETES_CONTROLLER] }),
    ).toContain(leader.firstNode.nodeId);
    expect(
      await ids({ labels: new Map([["zone", "a"]]), states: [common.NodeState.STANDBY] }),
    ).toEqual([]);
    await expectCode(
      owner.getNodes({ roles: [api.NodeRole.UNSPECIFIED] }),
      status.INVALID_ARGUMENT,
    );
  });
});

describe("ApproveNode", () => {
  it("moves a NEW node to STANDBY, idempotently, by id or public key", async () => {
    const n = await leader.addNode({ state: common.NodeState.NEW });
    await owner.approveNode({ node: { $case: "pubkey", pubkey: n.publicKey } });
    expect((await leader.getNode(n.nodeId))?.state).toBe(common.NodeState.STANDBY);
    await owner.approveNode({ node: byId(n.nodeId) });
    expect((await leader.getNode(n.nodeId))?.state).toBe(common.NodeState.STANDBY);
    await owner.approveNode({ node: byId(leader.firstNode.nodeId) }); // UP: already approved
  });

  it("validates its request", async () => {
    const unknown = await leader.addNode({ state: common.NodeState.NEW });
    await leader.deleteNode(unknown.nodeId);
    await expectCode(owner.approveNode({ node: byId(unknown.nodeId) }), status.NOT_FOUND);
    await expectCode(
      owner.approveNode({ node: { $case: "pubkey", pubkey: unknown.publicKey } }),
      status.NOT_FOUND,
    );
    await expectCode(owner.approveNode({ node: byId("node-1") }), status.INVALID_ARGUMENT);
    await expectCode(
      owner.approveNode({ node: { $case: "pubkey", pubkey: Buffer.alloc(31) } }),
      status.INVALID_ARGUMENT,
    );
    await expectCode(owner.approveNode({ node: undefined }), status.INVALID_ARGUMENT);
  });
});

describe("UpdateNodeRoles", () => {
  it("adds a consensus member as an etcd learner, and removes it again", async () => {
    // Outside 127.0.0.x, where the test cluster's own member has its random address.
    const learnerUrl = "https://127.0.1.9:7834";
    const n = await leader.addNode();
    const req = { node: byId(n.nodeId), consensusMember: true };
    await expectCode(owner.updateNodeRoles(req), status.FAILED_PRECONDITION, /external address/);

    await leader.updateNode(n.nodeId, (node) => ({
      ...node,
      status: { externalAddress: "127.0.1.9", version: "", bootId: "", protocolVersion: 1 },
    }));
    await owner.updateNodeRoles({ ...req, kubernetesWorker: true });
    const roles = (await leader.getNode(n.nodeId))?.roles;
    expect(roles?.consensusMember).toBeDefined();
    expect(roles?.kubernetesWorker).toBeDefined();
    // The role carries what the node needs to start its etcd member.
    expect(roles?.consensusMember?.peers.map((p) => p.name)).toContain(n.nodeId);
    expect(roles?.consensusMember?.peers.find((p) => p.name === n.nodeId)?.peerUrl).toBe(
      learnerUrl,
    );
    expect(parseCertificate(roles!.consensusMember!.peerCertificate).publicKey).toEqual(
      Buffer.from(n.publicKey),
    );
    expect(parseCertificate(roles!.consensusMember!.caCertificate).isCA).toBe(true);
    const members = await leader.ctx.consensus.members();
    // Matched by the whole URL: the cluster's own member sits on a random 127.0.0.x, which a
    // substring "127.0.0.9" also finds when it is 127.0.0.9x.
    const learner = members.find((m) => m.peerURLs.includes(learnerUrl));
    expect(learner?.isLearner).toBe(true);
    await owner.updateNodeRoles(req); // idempotent

    await owner.updateNodeRoles({ node: byId(n.nodeId), consensusMember: false });
    expect((await leader.getNode(n.nodeId))?.roles?.consensusMember).toBeUndefined();
    expect((await leader.getNode(n.nodeId))?.roles?.kubernetesWorker).toBeDefined();
    expect(removedFromConsensus).toContain(n.nodeId);
    // The learner never started (it has no name yet); removal found it by its address.
    const after = await leader.ctx.consensus.members();
    expect(after.some((m) => m.peerURLs.includes(learnerUrl))).toBe(false);
  });

  it("refuses to take consensus from a Kubernetes controller, and roles on nodes not UP", async () => {
    const controller = await leader.addNode({
      roles: {
        consensusMember: common.NodeRoles_ConsensusMember.create(),
        kubernetesController: {},
      },
    });
    await expectCode(
      owner.updateNodeRoles({ node: byId(controller.nodeId), consensusMember: false }),
      status.FAILED_PRECONDITION,
      /Kubernetes controller/,
    );
    // Taking both away at once is fine (and touches no etcd member: it never had one).
    await owner.updateNodeRoles({
      node: byId(controller.nodeId),
      consensusMember: false,
      kubernetesController: false,
    });
    expect((await leader.getNode(controller.nodeId))?.roles).toEqual({});

    const plain = await leader.addNode();
    await expectCode(
      owner.updateNodeRoles({ node: byId(plain.nodeId), kubernetesController: true }),
      status.FAILED_PRECONDITION,
      /must be a consensus member/,
    );
    const standby = await leader.addNode({ state: common.NodeState.STANDBY });
    await expectCode(
      owner.updateNodeRoles({ node: byId(standby.nodeId), kubernetesWorker: true }),
      status.FAILED_PRECONDITION,
      /UP/,
    );
  });
});

describe("UpdateNodeLabels", () => {
  it("adds and removes labels, removals first", async () => {
    const n = await leader.addNode({
      labels: new Map([
        ["keep", "1"],
        ["drop", "2"],
        ["swap", "old"],
      ]),
    });
    await owner.updateNodeLabels({
      node: byId(n.nodeId),
      add: new Map([
        ["example.com/new", "v"],
        ["swap", "new"],
        ["empty", ""],
      ]),
      remove: ["drop", "swap", "absent"],
    });
    expect(Object.fromEntries((await leader.getNode(n.nodeId))?.labels ?? [])).toEqual({
      keep: "1",
      "example.com/new": "v",
      swap: "new",
      empty: "",
    });
  });

  it("validates keys and values", async () => {
    const n = await leader.addNode();
    const invalid: Array<[string, string]> = [
      ["-bad", "v"],
      ["a".repeat(64), "v"],
      ["UPPER.Example/k", "v"],
      ["a/b/c", "v"],
      ["", "v"],
      ["k", "v".repeat(64)],
      ["k", "not valid"],
      ["k", "-v"],
    ];
    for (const label of invalid) {
      const add = new Map([label]);
      await expectCode(
        owner.updateNodeLabels({ node: byId(n.nodeId), add }),
        status.INVALID_ARGUMENT,
      );
    }
    const longest = new Map([["a".repeat(63), "x_y.z-1"]]);
    await owner.updateNodeLabels({ node: byId(n.nodeId), add: longest });
    expect((await leader.getNode(n.nodeId))?.labels).toEqual(longest);
  });

  it("allows at most 128 labels per node", async () => {
    const labels = (count: number, from = 0) =>
      new Map(Array.from({ length: count }, (_, i) => [`l${from + i}`, "v"]));
    const n = await leader.addNode({ labels: labels(maxLabelsPerNode - 1) });
    await owner.updateNodeLabels({ node: byId(n.nodeId), add: labels(1, 1000) });
    await expectCode(
      owner.updateNodeLabels({ node: byId(n.nodeId), add: labels(1, 2000) }),
      status.FAILED_PRECONDITION,
      /128/,
    );
    // Removals are applied first, so a swap at the limit works.
    await owner.updateNodeLabels({ node: byId(n.nodeId), add: labels(1, 2000), remove: ["l0"] });
    expect((await leader.getNode(n.nodeId))?.labels.size).toBe(maxLabelsPerNode);
    await expectCode(
      owner.updateNodeLabels({ node: byId(n.nodeId), add: labels(maxLabelsPerNode + 1, 3000) }),
      status.INVALID_ARGUMENT,
    );
  });
});

describe("DeleteNode", () => {
  it("deletes a node without roles that is not UP, with its join key", async () => {
    const n = await leader.addNode({ state: common.NodeState.STANDBY });
    leader.ctx.heartbeats.beat(n.nodeId);
    await owner.deleteNode({ node: byId(n.nodeId) });
    expect(await leader.getNode(n.nodeId)).toBeUndefined();
    expect(await leader.ctx.kv.get(joinKeyKey(n.join.publicKey)).string()).toBeNull();
    expect(leader.ctx.heartbeats.sinceLast(n.nodeId)).toBeUndefined();
    await expectCode(owner.deleteNode({ node: byId(n.nodeId) }), status.NOT_FOUND);
  });

  it("refuses UP nodes and nodes with roles unless bypassed", async () => {
    const up = await leader.addNode();
    await expectCode(owner.deleteNode({ node: byId(up.nodeId) }), status.FAILED_PRECONDITION, /UP/);
    await owner.deleteNode({ node: byId(up.nodeId), bypassNodeUp: true });
    expect(await leader.getNode(up.nodeId)).toBeUndefined();

    const worker = await leader.addNode({ roles: { kubernetesWorker: {} } });
    await expectCode(
      owner.deleteNode({ node: byId(worker.nodeId), bypassNodeUp: true }),
      status.FAILED_PRECONDITION,
      /roles/,
    );
    await owner.deleteNode({
      node: { $case: "pubkey", pubkey: worker.publicKey },
      bypassNodeUp: true,
      bypassHasRoles: true,
    });
    expect(await leader.getNode(worker.nodeId)).toBeUndefined();
  });
});

describe("DeleteNode of the last consensus member", () => {
  // A fixture of its own: were the refusal missing, the shared leader's cluster would be gone.
  let own: LeaderFixture;
  afterAll(async () => {
    await own?.stop();
  });

  it("is refused, bypass or not; another member may be deleted", async () => {
    own = await startLeader({
      services: (ctx) => [[managementService, managementServer(ctx)]],
    });
    const ownOwner = promised(await own.client(api.ManagementClient, "owner"));
    const last = own.firstNode.nodeId;
    const members = async () => (await own.member.status.members()).map((m) => m.name);
    const membersBefore = await members();
    const bypasses = [
      {},
      { bypassNodeUp: true },
      { bypassHasRoles: true },
      { bypassNodeUp: true, bypassHasRoles: true },
    ];
    for (const bypass of bypasses) {
      await expectCode(
        ownOwner.deleteNode({ node: byId(last), ...bypass }),
        status.FAILED_PRECONDITION,
        new RegExp(`^node ${last} is the last consensus member; it cannot be deleted`),
      );
    }
    expect((await own.getNode(last))?.roles?.consensusMember).toBeDefined();
    expect(await members()).toEqual(membersBefore);

    // With a second member, neither is the last: the usual rules (and bypasses) apply.
    const other = await own.addNode({
      roles: { consensusMember: common.NodeRoles_ConsensusMember.create() },
    });
    await expectCode(
      ownOwner.deleteNode({ node: byId(other.nodeId), bypassNodeUp: true }),
      status.FAILED_PRECONDITION,
      /still has roles/,
    );
    await ownOwner.deleteNode({
      node: byId(other.nodeId),
      bypassNodeUp: true,
      bypassHasRoles: true,
    });
    expect(await own.getNode(other.nodeId)).toBeUndefined();
    expect(await own.candidacy.leadership().stillLeads()).toBe(true);
  });
});

describe("authorization", () => {
  const calls = (m: Management, nodeId: string): Array<Promise<unknown>> => [
    m.getRegisterTicket(),
    m.getClusterInfo(),
    m.getNodes(),
    m.getClusterConsensus(),
    m.approveNode({ node: byId(nodeId) }),
    m.updateNodeRoles({ node: byId(nodeId), kubernetesWorker: true }),
    m.updateNodeLabels({ node: byId(nodeId), add: new Map([["a", "b"]]) }),
    m.deleteNode({ node: byId(nodeId) }),
  ];

  it.each([
    ["a node certificate", "node" as const, status.PERMISSION_DENIED],
    ["a self-signed certificate", "ephemeral" as const, status.PERMISSION_DENIED],
    ["no certificate", "none" as const, status.UNAUTHENTICATED],
  ])("refuses every call with %s", async (_what, identity, code) => {
    const target = await leader.addNode({ state: common.NodeState.NEW });
    const client = await clientAs(
      identity === "ephemeral" ? { ephemeral: target.privateKey } : identity,
    );
    for (const p of calls(client, target.nodeId)) await expectCode(p, code);
    const untouched = await leader.getNode(target.nodeId);
    expect(untouched?.state).toBe(common.NodeState.NEW);
    expect(untouched?.labels.size).toBe(0);
  });
});

describe("UpdateNodeRoles on the leader's own node", () => {
  // A fixture of its own: the leader steps down here, which the other tests' leader must not.
  let own: LeaderFixture;
  afterAll(async () => {
    await own?.stop();
  });

  it("hands the leadership over instead of removing its own etcd member, and asks for a retry", async () => {
    own = await startLeader({
      services: (ctx) => [[managementService, managementServer(ctx)]],
    });
    const ownOwner = promised(await own.client(api.ManagementClient, "owner"));
    const self = own.firstNode.nodeId;
    // Forced: the other member is a record only (no etcd member), so the quorum check refuses it.
    const request = {
      node: byId(self),
      consensusMember: false,
      kubernetesController: false,
      force: true,
    };

    // The last consensus member is refused before any hand-over.
    await expectCode(
      ownOwner.updateNodeRoles(request),
      status.FAILED_PRECONDITION,
      /last consensus member/,
    );
    expect(await own.candidacy.leadership().stillLeads()).toBe(true);

    await own.addNode({ roles: { consensusMember: common.NodeRoles_ConsensusMember.create() } });
    const membersBefore = await own.member.status.members();
    await expectCode(
      ownOwner.updateNodeRoles(request),
      status.UNAVAILABLE,
      new RegExp(`leadership handed over .* from ${self}, which led; retry with the new leader`),
    );
    // No longer the leader (its election key is gone, the candidacy over), and nothing changed.
    expect(await own.candidacy.leadership().stillLeads()).toBe(false);
    await expect(own.candidacy.lost).resolves.toBeInstanceOf(LostLeadershipError);
    expect((await own.member.status.members()).map((m) => m.name)).toEqual(
      membersBefore.map((m) => m.name),
    );
    expect((await own.getNode(self))?.roles?.consensusMember).toBeDefined();
    // A retry that reaches it again (a client with a stale leader) is told the same: retry.
    await expectCode(ownOwner.updateNodeRoles(request), status.UNAVAILABLE, /lost leadership/);
  });
});
