/**
 * The quorum check of maintenance and etcd's member operations through
 * Management, on a real 3-member etcd (the leader fixture's member and two
 * that join it the way a node given the consensus role does, each with a
 * node record of its own), as the owner calls them over mutual TLS:
 *
 * - CheckNodeMaintenance, DefragmentConsensus, MoveConsensusLeader with three
 *   healthy voters, one allowed action holding its node until it reports a
 *   new boot; alarms raised on a member listed and disarmed;
 * - a member stopped: maintenance of the others refused FAILED_PRECONDITION
 *   naming it, the stopped member's node decommissioned (etcd's member list
 *   no longer has it, its record DECOMMISSIONED without roles);
 * - a learner that never started: refused while it is there, then removed
 *   with RemoveConsensusMember (a member with a node holding the role is
 *   refused);
 * - two voters left: a reboot of either refused, the quorum of two named.
 */
import { status, type ServiceError } from "@grpc/grpc-js";
import { hexMemberId, memberClient, raiseAlarm } from "@metropolis/consensus";
import { TestMembers, type TestMember, type TestNode } from "@metropolis/consensus/testing";
import { api, common } from "@metropolis/proto";
import { eventually } from "@metropolis/supervisor/testing";
import { managementServer, managementService } from "../src/management-service";
import { startLeader, type LeaderFixture } from "@metropolis/curator/testing";
import { expectCode } from "./expect-code";

type Callback<Res> = (err: ServiceError | null, res?: Res) => void;

/** A unary call of the owner's client as a promise. */
function call<Res>(start: (cb: Callback<Res>) => unknown): Promise<Res> {
  return new Promise<Res>((resolve, reject) =>
    start((err, res) => {
      if (err) reject(err);
      else if (res === undefined) reject(new Error("no answer"));
      else resolve(res);
    }),
  );
}

let leader: LeaderFixture;
let owner: api.ManagementClient;
const joined = new TestMembers();
let b: TestNode;
let c: TestNode;
let memberB: TestMember;
let memberC: TestMember;

const byId = (id: string) => ({ $case: "id" as const, id });

const check = (id: string, action: api.NodeMaintenance) =>
  call<api.CheckNodeMaintenanceResponse>((cb) =>
    owner.checkNodeMaintenance({ node: byId(id), action }, cb),
  );
const consensus = () =>
  call<api.GetClusterConsensusResponse>((cb) => owner.getClusterConsensus({}, cb));
const alarms = () => call<api.GetConsensusAlarmsResponse>((cb) => owner.getConsensusAlarms({}, cb));

/** A record for test node `node`, UP, a consensus member at its peer address. */
async function recordOf(node: TestNode): Promise<void> {
  await leader.addNode({
    keys: { privateKey: Buffer.from(node.privateKey), publicKey: Buffer.from(node.publicKey) },
    roles: { consensusMember: common.NodeRoles_ConsensusMember.create() },
    status: common.NodeStatus.fromPartial({ externalAddress: node.peer.host }),
  });
}

/** The member IDs (hex) by node ID, as etcd lists them. */
async function memberIds(): Promise<Map<string, string>> {
  return new Map(
    (await leader.member.status.members()).map((m): [string, string] => [
      m.name,
      hexMemberId(m.ID),
    ]),
  );
}

beforeAll(async () => {
  leader = await startLeader({ services: (ctx) => [[managementService, managementServer(ctx)]] });
  owner = await leader.client(api.ManagementClient, "owner");
  b = await joined.node("b");
  c = await joined.node("c");
  memberB = await joined.join(leader.member, b);
  // c's etcd exits by itself once its member is removed.
  memberC = await joined.join(leader.member, c, { expectEtcdDeath: true });
  await recordOf(b);
  await recordOf(c);
  await eventually(async () => {
    const res = await consensus();
    return (
      res.members.length === 3 &&
      res.members.every((m) => m.reachability === common.ConsensusMember_Reachability.REACHABLE)
    );
  }, "three reachable voters");
}, 60_000);

afterAll(async () => {
  await leader?.stop();
  await joined.cleanup();
});

/** Node `id` reports a new boot, as after a reboot: a hold of its maintenance ends. */
const rebooted = (id: string) =>
  leader.updateNode(id, (n) => ({
    ...n,
    status: common.NodeStatus.fromPartial({ ...n.status, bootId: `boot-${Math.random()}` }),
  }));

it("allows maintenance of one of three healthy voters, then of another only once the first is back, and of a node without a member", async () => {
  expect(await check(b.nodeId, api.NodeMaintenance.REBOOT)).toEqual({
    consensusMember: true,
    healthyVotersAfter: 2,
    quorumAfter: 2,
  });
  // b's reboot was allowed, and etcd does not see it gone yet: c must wait (maintenance-holds.ts).
  await expectCode(
    check(c.nodeId, api.NodeMaintenance.DECOMMISSION),
    status.FAILED_PRECONDITION,
    new RegExp(
      `^decommissioning node ${c.nodeId} is refused: voter member [0-9a-f]+ of node ${b.nodeId} is under maintenance: rebooting it was allowed [0-9]+ s ago`,
    ),
  );
  // Asked again, b's own check still passes.
  expect(await check(b.nodeId, api.NodeMaintenance.REBOOT)).toMatchObject({ quorumAfter: 2 });
  await rebooted(b.nodeId);
  const allowed = await eventually(
    () => check(c.nodeId, api.NodeMaintenance.DECOMMISSION).catch(() => undefined),
    "c's decommission allowed once b reported its new boot",
  );
  expect(allowed).toEqual({ consensusMember: true, healthyVotersAfter: 2, quorumAfter: 2 });
  await rebooted(c.nodeId);
  const plain = await leader.addNode();
  expect(await check(plain.nodeId, api.NodeMaintenance.POWER_OFF)).toMatchObject({
    consensusMember: false,
  });
  await expectCode(
    check(plain.nodeId, api.NodeMaintenance.UNSPECIFIED),
    status.INVALID_ARGUMENT,
    /action must be one of REBOOT|NODE_MAINTENANCE_REBOOT/,
  );
});

it("lists an alarm raised on a member with its node, and disarms it", async () => {
  const ids = await memberIds();
  const idC = ids.get(c.nodeId) ?? "";
  const raw = memberClient(leader.member.status.clientSocket);
  try {
    await raiseAlarm(raw, idC, "NOSPACE");
    try {
      expect((await alarms()).alarms).toEqual([
        { memberId: idC, nodeId: c.nodeId, alarm: api.ConsensusAlarmType.NOSPACE },
      ]);
    } finally {
      const disarmed = await call<api.DisarmConsensusAlarmResponse>((cb) =>
        owner.disarmConsensusAlarm({ memberId: idC, alarm: api.ConsensusAlarmType.NONE }, cb),
      );
      expect(disarmed.disarmed).toEqual([
        { memberId: idC, nodeId: c.nodeId, alarm: api.ConsensusAlarmType.NOSPACE },
      ]);
    }
    expect((await alarms()).alarms).toEqual([]);
    await expectCode(
      call((cb) => owner.disarmConsensusAlarm({ memberId: "XYZ", alarm: 0 }, cb)),
      status.INVALID_ARGUMENT,
      /member_id: "XYZ" is not an etcd member ID/,
    );
  } finally {
    raw.close();
  }
});

it("defragments the curator leader's member, and moves raft leadership from it and not from elsewhere", async () => {
  const ids = await memberIds();
  const own = ids.get(leader.node.nodeId) ?? "";
  const defrag = await call<api.DefragmentConsensusResponse>((cb) =>
    owner.defragmentConsensus({ force: false }, cb),
  );
  expect(defrag).toMatchObject({ nodeId: leader.node.nodeId, memberId: own });
  expect(defrag.dbSizeAfter).toBeGreaterThan(0);

  // The leader's member leads raft (moved there first if an election put it elsewhere).
  const raftLeader = async () => (await leader.member.status.raftStatus()).leaderId;
  const current = await raftLeader();
  if (current !== own) {
    const holder = [memberB, memberC].find(
      (m) => ids.get(m === memberB ? b.nodeId : c.nodeId) === current,
    );
    if (holder === undefined) throw new Error(`raft leader ${String(current)} is no member`);
    const raw = memberClient(holder.status.clientSocket);
    try {
      await raw.maintenance.moveLeader({ targetID: BigInt(`0x${own}`).toString(10) });
    } finally {
      raw.close();
    }
    await eventually(async () => (await raftLeader()) === own, "raft led by the leader's member");
  }
  const moved = await call<api.MoveConsensusLeaderResponse>((cb) =>
    owner.moveConsensusLeader({ nodeId: b.nodeId }, cb),
  );
  expect(moved).toEqual({ fromMemberId: own, toMemberId: ids.get(b.nodeId) });
  await eventually(
    async () => (await raftLeader()) === ids.get(b.nodeId),
    "raft led by b's member",
  );
  // Now the curator leader's member does not lead raft: etcd would not take it from there.
  await expectCode(
    call((cb) => owner.moveConsensusLeader({ nodeId: c.nodeId }, cb)),
    status.FAILED_PRECONDITION,
    new RegExp(
      `does not lead raft \\(member ${ids.get(b.nodeId)} does\\).*move it from node ${b.nodeId}`,
    ),
  );
  // Back to the curator leader's member, asked of b's (the raft leader's) own etcd.
  const rawB = memberClient(memberB.status.clientSocket);
  try {
    await rawB.maintenance.moveLeader({ targetID: BigInt(`0x${own}`).toString(10) });
  } finally {
    rawB.close();
  }
  await eventually(async () => (await raftLeader()) === own, "raft led by the leader's member");
});

it("refuses maintenance while a voter is down, and decommissions the node of that voter", async () => {
  const ids = await memberIds();
  await joined.stop(memberC);
  await eventually(
    async () => (await consensus()).faultTolerance?.unreachableVoters === 1,
    "c unreachable",
  );

  const notHealthy = new RegExp(
    `voter member ${ids.get(c.nodeId)} of node ${c.nodeId} is not healthy: the curator leader's etcd member has no raft connection with it`,
  );
  await expectCode(
    check(b.nodeId, api.NodeMaintenance.REBOOT),
    status.FAILED_PRECONDITION,
    notHealthy,
  );
  await expectCode(
    call((cb) => owner.defragmentConsensus({ force: false }, cb)),
    status.FAILED_PRECONDITION,
    notHealthy,
  );
  await expectCode(
    call((cb) => owner.decommissionNode({ node: byId(b.nodeId), force: false }, cb)),
    status.FAILED_PRECONDITION,
    /^decommissioning node .* is refused: voter member/,
  );
  await expectCode(
    call((cb) => owner.updateNodeRoles({ node: byId(b.nodeId), consensusMember: false }, cb)),
    status.FAILED_PRECONDITION,
    /^taking the consensus role away from node .* is refused/,
  );
  // Its member belongs to a node holding the role: the node's own calls remove it.
  await expectCode(
    call((cb) =>
      owner.removeConsensusMember({ memberId: ids.get(c.nodeId) ?? "", force: true }, cb),
    ),
    status.FAILED_PRECONDITION,
    /holds the consensus role: take the role away .* or decommission the node/,
  );
  expect((await leader.member.status.members()).length).toBe(3);

  // The down voter itself may go: the two others are healthy and form the quorum of two.
  const done = await call<api.DecommissionNodeResponse>((cb) =>
    owner.decommissionNode({ node: byId(c.nodeId), force: false }, cb),
  );
  expect(done).toEqual({
    nodeId: c.nodeId,
    consensusMemberRemoved: true,
    revokedPeerCertificates: expect.any(Number),
    alreadyDecommissioned: false,
    wipeRequested: false,
    wipeAcknowledged: false,
  });
  expect(done.revokedPeerCertificates).toBeGreaterThan(0);
  expect((await leader.member.status.members()).map((m) => m.name).sort()).toEqual(
    [leader.node.nodeId, b.nodeId].sort(),
  );
  const record = await leader.getNode(c.nodeId);
  expect(record?.state).toBe(common.NodeState.DECOMMISSIONED);
  expect(record?.roles).toEqual({});
  // Again: nothing left to do, and said so.
  expect(
    await call<api.DecommissionNodeResponse>((cb) =>
      owner.decommissionNode({ node: byId(c.nodeId), force: false }, cb),
    ),
  ).toMatchObject({ consensusMemberRemoved: false, alreadyDecommissioned: true });
}, 60_000);

it("refuses maintenance while a learner is there, removes that orphan learner, and refuses a reboot of one of two voters", async () => {
  const d = await joined.node("d");
  // A learner nobody starts, and no node record accounts for.
  await leader.member.status.addNode(d.nodeId, d.publicKey, d.peer);
  const learner = (await leader.member.status.members()).find((m) => m.isLearner);
  if (learner === undefined) throw new Error("no learner");
  const learnerId = hexMemberId(learner.ID);
  await expectCode(
    check(b.nodeId, api.NodeMaintenance.REBOOT),
    status.FAILED_PRECONDITION,
    new RegExp(
      `member ${learnerId} \\(not started\\) is a learner \\(a membership change is under way\\)`,
    ),
  );
  expect(
    await call<api.RemoveConsensusMemberResponse>((cb) =>
      owner.removeConsensusMember({ memberId: learnerId, force: false }, cb),
    ),
  ).toEqual({ nodeId: "", memberId: learnerId });
  expect((await leader.member.status.members()).some((m) => m.isLearner)).toBe(false);
  await expectCode(
    call((cb) => owner.removeConsensusMember({ memberId: learnerId, force: false }, cb)),
    status.NOT_FOUND,
    new RegExp(`etcd has no member ${learnerId}`),
  );

  // Two voters: either away leaves one, fewer than their quorum of two.
  for (const id of [b.nodeId, leader.node.nodeId]) {
    await expectCode(
      check(id, api.NodeMaintenance.REBOOT),
      status.FAILED_PRECONDITION,
      /afterwards 1 healthy voter would remain, fewer than the quorum of 2 \(of 2 voters\)/,
    );
  }
}, 60_000);
