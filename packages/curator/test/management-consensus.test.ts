/**
 * Management.GetClusterConsensus on a real 3-member etcd, as the owner calls
 * it: the leader fixture's cluster (one bootstrapped member), which two more
 * members join the way a node given the consensus role does. Checked against
 * etcd's own word, read without the curator: each member's
 * `etcd_server_is_leader` gauge names the raft leader, and each member's raft
 * status the term. The fault tolerance follows the membership: one voter and
 * a learner tolerate nothing, two voters nothing, three voters one failure;
 * a stopped voter shows as unreachable.
 */
import { request } from "node:http";
import type { ServiceError } from "@grpc/grpc-js";
import { hexMemberId, memberClient } from "@metropolis/consensus";
import { TestMembers, type TestMember } from "@metropolis/consensus/testing";
import { api, common } from "@metropolis/proto";
import { eventually } from "@metropolis/supervisor/testing";
import { managementServer, managementService } from "../src/management-service";
import { startLeader, type LeaderFixture } from "@metropolis/curator/testing";

const { VOTER, LEARNER } = common.ConsensusMember_Status;
const { REACHABLE, UNREACHABLE } = common.ConsensusMember_Reachability;

let leader: LeaderFixture;
let owner: api.ManagementClient;
const joined = new TestMembers();

beforeAll(async () => {
  leader = await startLeader({ services: (ctx) => [[managementService, managementServer(ctx)]] });
  owner = await leader.client(api.ManagementClient, "owner");
}, 30_000);

afterAll(async () => {
  // The leader's member first: the other two keep quorum while its candidacy resigns.
  await leader?.stop();
  await joined.cleanup();
});

function getClusterConsensus(): Promise<api.GetClusterConsensusResponse> {
  return new Promise((resolve, reject) =>
    owner.getClusterConsensus({}, (err: ServiceError | null, res?) =>
      err || !res ? reject(err ?? new Error("no answer")) : resolve(res),
    ),
  );
}

/** A gauge of a member's own /metrics, over its unix socket: etcd's word, not the curator's. */
function gauge(member: Pick<TestMember, "status">, name: string): Promise<number> {
  return new Promise((resolve, reject) => {
    request({ socketPath: member.status.clientSocket, path: "/metrics", agent: false }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (text += chunk));
      res.on("end", () => {
        const line = text.split("\n").find((l) => l.startsWith(`${name} `));
        if (line === undefined) reject(new Error(`no ${name} in /metrics`));
        else resolve(Number(line.split(" ")[1]));
      });
    })
      .on("error", reject)
      .end();
  });
}

it("names the one raft leader etcd names, and says how many failures the consensus survives", async () => {
  // One voter: it leads raft, and the cluster survives no failure.
  const one = await getClusterConsensus();
  expect(one.members).toHaveLength(1);
  expect(one.members[0]).toMatchObject({
    status: VOTER,
    raftLeader: true,
    reachability: REACHABLE,
  });
  expect(one.raft?.leaderMemberId).toBe(one.members[0].memberId);
  expect(one.faultTolerance).toEqual({
    voters: 1,
    learners: 0,
    quorum: 1,
    tolerates: 0,
    unreachableVoters: 0,
  });

  // A second member joins: a learner until promoted (and unnamed until it starts).
  const b = await joined.node("b");
  const joinB = await leader.member.status.addNode(b.nodeId, b.publicKey, b.peer);
  const withLearner = await getClusterConsensus();
  const learner = withLearner.members.find((m) => m.status === LEARNER);
  expect(learner).toMatchObject({ raftLeader: false, reachability: UNREACHABLE });
  expect(withLearner.faultTolerance).toMatchObject({ voters: 1, learners: 1, tolerates: 0 });

  // Two voters: a quorum of two, still no failure survived.
  const memberB = await joined.run(b, { join: joinB });
  await eventually(
    async () => (await getClusterConsensus()).faultTolerance?.voters === 2,
    "b promoted",
  );
  expect((await getClusterConsensus()).faultTolerance).toMatchObject({
    voters: 2,
    learners: 0,
    quorum: 2,
    tolerates: 0,
  });

  // Three voters: one failure survived.
  const c = await joined.node("c");
  const memberC = await joined.join(leader.member, c);
  const members = [leader.member, memberB, memberC];
  const ids = new Map(
    (await leader.member.status.members()).map((m): [string, string] => [
      m.name,
      hexMemberId(m.ID),
    ]),
  );
  const three = await eventually(async () => {
    const res = await getClusterConsensus();
    return res.members.every((m) => m.reachability === REACHABLE) && res;
  }, "every member reached");
  expect(three.faultTolerance).toEqual({
    voters: 3,
    learners: 0,
    quorum: 2,
    tolerates: 1,
    unreachableVoters: 0,
  });
  expect(three.members.map((m) => m.nodeId).sort()).toEqual(
    [leader.node.nodeId, b.nodeId, c.nodeId].sort(),
  );
  for (const m of three.members) expect(m.memberId).toBe(ids.get(m.nodeId));

  // Exactly one raft leader, the member whose etcd says it leads, in the term every member is in.
  const etcdLeader = async () => {
    const isLeader = await Promise.all(members.map((m) => gauge(m, "etcd_server_is_leader")));
    expect(isLeader.filter((x) => x === 1)).toHaveLength(1);
    return isLeader.indexOf(1);
  };
  const expectRaftLeader = async (res: api.GetClusterConsensusResponse, index: number) => {
    const nodeId = [leader.node, b, c][index].nodeId;
    expect(res.members.filter((m) => m.raftLeader).map((m) => m.nodeId)).toEqual([nodeId]);
    expect(res.raft?.leaderMemberId).toBe(ids.get(nodeId));
    const terms = await Promise.all(
      members.map(async (m) => (await m.status.raftStatus()).raftTerm),
    );
    expect(new Set(terms)).toEqual(new Set([res.raft?.term]));
  };
  const first = await etcdLeader();
  await expectRaftLeader(three, first);

  // Raft leadership moves (etcd's MoveLeader, asked of the raft leader) to a member that is
  // not the curator leader's own: the answer names that one, not the member it was read from.
  const target = first === 2 ? 1 : first + 1;
  const raw = memberClient(members[first].status.clientSocket);
  try {
    const targetId = (await leader.member.status.members()).find(
      (m) => m.name === [leader.node, b, c][target].nodeId,
    )?.ID;
    await raw.maintenance.moveLeader({ targetID: targetId });
  } finally {
    raw.close();
  }
  const moved = await eventually(async () => {
    const res = await getClusterConsensus();
    return res.raft?.leaderMemberId === ids.get([leader.node, b, c][target].nodeId) && res;
  }, "the answer follows the raft leader");
  expect(await etcdLeader()).toBe(target);
  await expectRaftLeader(moved, target);
  expect(moved.raft?.term).toBeGreaterThan(three.raft?.term ?? Infinity);

  // c stops: still three voters, one of them down — the one failure the cluster survives.
  await joined.stop(memberC);
  const down = await eventually(async () => {
    const res = await getClusterConsensus();
    return res.faultTolerance?.unreachableVoters === 1 && res;
  }, "c unreachable");
  expect(down.members.find((m) => m.nodeId === c.nodeId)?.reachability).toBe(UNREACHABLE);
  expect(down.faultTolerance).toMatchObject({ voters: 3, tolerates: 1, unreachableVoters: 1 });
  expect(down.members.filter((m) => m.raftLeader)).toHaveLength(1);
});
