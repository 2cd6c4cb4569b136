/**
 * `metroctl cluster members` against a real curator leader whose etcd grows
 * from one voter to three (members joined the way a node given the consensus
 * role joins), with a learner that never starts, and a voter stopped: the
 * table, the summary line and `-o json` follow, and the raft leader they name
 * is the one etcd's own status names. The wording of the summary on its own.
 */
import { hexMemberId } from "@metropolis/consensus";
import { TestMembers } from "@metropolis/consensus/testing";
import { eventually } from "@metropolis/supervisor/testing";
import { faultToleranceSummary } from "../src/consensus-fields";
import type { ClusterMembersView } from "../src/cluster-members";
import { metroctl, startCluster, type MetroctlCluster } from "./cluster-fixture";

let cluster: MetroctlCluster;
let config: string;
const joined = new TestMembers();

beforeAll(async () => {
  cluster = await startCluster();
  config = await cluster.ownerConfig();
}, 30_000);

afterAll(async () => {
  // The leader's member first: the others keep quorum while its candidacy resigns.
  await cluster?.stop();
  await joined.cleanup();
});

/** The table's rows (without the heading), each split into its columns. */
function rows(stdout: string): string[][] {
  const [table] = stdout.split("\n\n");
  return table
    .split("\n")
    .slice(1)
    .map((l) => l.split(/\s{2,}/));
}

/** The last non-empty line: the summary. */
const summary = (stdout: string) => stdout.trimEnd().split("\n").at(-1);

async function membersJson(): Promise<ClusterMembersView> {
  const res = await metroctl(config, ["cluster", "members", "-o", "json"]);
  expect(res).toMatchObject({ code: 0, stderr: "" });
  const view: ClusterMembersView = JSON.parse(res.stdout);
  return view;
}

it("shows voters, learners, the raft leader and the fault tolerance as the cluster grows", async () => {
  const { leader } = cluster;
  const firstId = leader.firstNode.nodeId;
  const own = await leader.member.status.raftStatus();

  // One voter: it leads raft, and its node's curator is the leader.
  const one = await metroctl(config, ["cluster", "members"]);
  expect(one).toMatchObject({ code: 0, stderr: "" });
  expect(one.stdout.split("\n")[0].split(/\s{2,}/)).toEqual([
    "NODE",
    "MEMBER ID",
    "STATUS",
    "RAFT LEADER",
    "REACHABLE",
    "CURATOR",
  ]);
  expect(rows(one.stdout)).toEqual([[firstId, own.memberId, "voter", "yes", "yes", "leader"]]);
  expect(summary(one.stdout)).toBe("1 voter, 0 learners: not fault tolerant");

  // A learner added, not started: shown as a learner nobody reaches, and counted for nothing.
  const b = await joined.node("b");
  const joinB = await leader.member.status.addNode(b.nodeId, b.publicKey, b.peer);
  const withLearner = await metroctl(config, ["cluster", "members"]);
  expect(rows(withLearner.stdout)).toEqual([
    [firstId, own.memberId, "voter", "yes", "yes", "leader"],
    ["(not started)", expect.stringMatching(/^[0-9a-f]+$/), "learner", "-", "no", "-"],
  ]);
  expect(summary(withLearner.stdout)).toBe("1 voter, 1 learner: not fault tolerant");
  expect((await membersJson()).faultTolerance).toEqual({
    voters: 1,
    learners: 1,
    quorum: 1,
    tolerates: 0,
    unreachableVoters: 0,
  });

  // Three voters: one failure survived.
  await joined.run(b, { join: joinB });
  const c = await joined.node("c");
  const memberC = await joined.join(leader.member, c);
  const three = await eventually(async () => {
    const res = await metroctl(config, ["cluster", "members"]);
    return rows(res.stdout).every((r) => r[2] === "voter" && r[4] === "yes") && res;
  }, "three reachable voters");
  expect(summary(three.stdout)).toBe("3 voters, 0 learners: tolerates 1 failure");
  expect(rows(three.stdout).map((r) => r[0])).toEqual([firstId, b.nodeId, c.nodeId].sort());

  // The raft leader shown is the one etcd's status names; JSON says the same as the table.
  const json = await membersJson();
  const etcd = await leader.member.status.raftStatus();
  expect(json.members.filter((m) => m.raftLeader).map((m) => m.memberId)).toEqual([etcd.leaderId]);
  expect(json.raft).toEqual({ leaderMemberId: etcd.leaderId, term: etcd.raftTerm });
  expect(rows(three.stdout).filter((r) => r[3] === "yes")).toEqual([
    expect.arrayContaining([etcd.leaderId]),
  ]);
  const ids = (await leader.member.status.members()).map((m) => hexMemberId(m.ID)).sort();
  expect(json.members.map((m) => m.memberId).sort()).toEqual(ids);
  expect(json.leader?.nodeId).toBe(firstId);
  expect(json.summary).toBe("3 voters, 0 learners: tolerates 1 failure");
  expect(json.faultTolerance).toEqual({
    voters: 3,
    learners: 0,
    quorum: 2,
    tolerates: 1,
    unreachableVoters: 0,
  });

  // c stops: its failure is the one the cluster survives, and the summary says so.
  await joined.stop(memberC);
  const down = await eventually(async () => {
    const res = await metroctl(config, ["cluster", "members"]);
    return rows(res.stdout).some((r) => r[0] === c.nodeId && r[4] === "no") && res;
  }, "c unreachable");
  expect(summary(down.stdout)).toBe(
    "3 voters, 0 learners: tolerates 1 failure; 1 voter unreachable, so no further failure",
  );
});

it("is a subcommand of cluster, next to configure, with its -o", async () => {
  const help = await metroctl(config, ["cluster", "--help"]);
  expect(help.code).toBe(0);
  expect(help.stdout).toMatch(/^ {2}configure\b/m);
  expect(help.stdout).toMatch(/^ {2}members\b/m);
  const bad = await metroctl(config, ["cluster", "members", "-o", "yaml"]);
  expect(bad.code).toBe(1);
  expect(bad.stderr).toBe(
    "metroctl: cluster members: option '-o, --output <format>' argument 'yaml' is invalid. Allowed choices are table, json.\n",
  );
});

describe("faultToleranceSummary", () => {
  const ft = (voters: number, learners: number, unreachableVoters = 0) => {
    const quorum = Math.floor(voters / 2) + 1;
    return { voters, learners, quorum, tolerates: voters - quorum, unreachableVoters };
  };

  it.each([
    [ft(1, 0), "1 voter, 0 learners: not fault tolerant"],
    [ft(2, 1), "2 voters, 1 learner: not fault tolerant"],
    [ft(3, 0), "3 voters, 0 learners: tolerates 1 failure"],
    [ft(5, 2), "5 voters, 2 learners: tolerates 2 failures"],
    [
      ft(3, 0, 1),
      "3 voters, 0 learners: tolerates 1 failure; 1 voter unreachable, so no further failure",
    ],
    [ft(5, 0, 1), "5 voters, 0 learners: tolerates 2 failures; 1 voter unreachable, so 1 more"],
    [
      ft(3, 0, 2),
      "3 voters, 0 learners: tolerates 1 failure; 2 voters unreachable: quorum (2) lost",
    ],
    [ft(2, 0, 1), "2 voters, 0 learners: not fault tolerant; 1 voter unreachable: quorum (2) lost"],
  ])("%j", (tolerance, text) => {
    expect(faultToleranceSummary(tolerance)).toBe(text);
  });
});
