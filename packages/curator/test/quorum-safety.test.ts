/**
 * The quorum check of maintenance (quorum-safety.ts) on consensus readings
 * of every shape: one to five voters, learners, unreachable and unknown
 * voters, members never started; temporary actions (reboot, power-off,
 * defragment) keep the whole quorum, removals shrink it. The same check on a
 * real etcd is in consensus-maintenance.test.ts.
 */
import { common } from "@metropolis/proto";
import { FailedPreconditionError } from "../src/errors";
import { checkQuorumSafe, type MaintenanceAction } from "../src/quorum-safety";

const { VOTER, LEARNER } = common.ConsensusMember_Status;
const { REACHABLE, UNREACHABLE, UNKNOWN } = common.ConsensusMember_Reachability;

/** A member of node `n` (member ID `aa<n>`). */
function member(n: string, status = VOTER, reachability = REACHABLE): common.ConsensusMember {
  return {
    nodeId: n,
    memberId: `aa${n}`,
    status,
    reachability,
    curatorRunning: false,
    raftLeader: false,
  };
}

const voters = (n: number) => Array.from({ length: n }, (_, i) => member(`${i + 1}`));

const refusal = (
  action: MaintenanceAction,
  node: string,
  members: common.ConsensusMember[],
): string => {
  try {
    checkQuorumSafe(action, { nodeId: node }, members);
  } catch (e) {
    if (e instanceof FailedPreconditionError) return e.message;
    throw e;
  }
  return "allowed";
};

describe("checkQuorumSafe", () => {
  it("lets a member of three healthy voters go away or leave, and keeps the quorum of all of them while it is away", () => {
    for (const action of ["reboot", "power-off", "defragment", "decommission"] as const) {
      expect(checkQuorumSafe(action, { nodeId: "1" }, voters(3))).toEqual({
        member: true,
        healthyVotersAfter: 2,
        quorumAfter: 2,
      });
    }
  });

  it("refuses a reboot of one of two voters (the other alone is no quorum of two), but not its removal", () => {
    expect(refusal("reboot", "1", voters(2))).toMatch(
      /^rebooting node 1 is refused: afterwards 1 healthy voter would remain, fewer than the quorum of 2 \(of 2 voters\); .*--force.*no longer committing writes/,
    );
    expect(refusal("power-off", "2", voters(2))).toMatch(/^powering off node 2 is refused/);
    expect(checkQuorumSafe("remove-consensus-role", { nodeId: "1" }, voters(2))).toEqual({
      member: true,
      healthyVotersAfter: 1,
      quorumAfter: 1,
    });
  });

  it("refuses anything to the only voter", () => {
    expect(refusal("reboot", "1", voters(1))).toMatch(
      /0 healthy voters would remain, fewer than the quorum of 1/,
    );
    expect(refusal("decommission", "1", voters(1))).toMatch(
      /^decommissioning node 1 is refused: afterwards 0 healthy voters would remain, fewer than the quorum of 1;/,
    );
  });

  it("refuses while another voter is unreachable, unknown or not started, or another member is a learner", () => {
    const three = voters(3);
    three[2] = member("3", VOTER, UNREACHABLE);
    expect(refusal("reboot", "1", three)).toMatch(
      /voter member aa3 of node 3 is not healthy: the curator leader's etcd member has no raft connection with it/,
    );
    three[2] = member("3", VOTER, UNKNOWN);
    expect(refusal("decommission", "1", three)).toMatch(
      /member aa3 of node 3 is not healthy: its reachability is unknown/,
    );
    three[2] = { ...member("", VOTER, REACHABLE), memberId: "ff" };
    expect(refusal("reboot", "1", three)).toMatch(
      /voter member ff \(not started\) is not healthy: it has not started/,
    );
    const withLearner = [...voters(3), member("4", LEARNER, UNREACHABLE)];
    expect(refusal("reboot", "1", withLearner)).toMatch(
      /member aa4 of node 4 is a learner \(a membership change is under way\)/,
    );
  });

  it("lets the unhealthy member itself go: five voters, two down, one of them removed", () => {
    const five = voters(5);
    five[3] = member("4", VOTER, UNREACHABLE);
    five[4] = member("5", VOTER, UNREACHABLE);
    // Another voter is down too: refused (the check asks for every other voter healthy).
    expect(refusal("decommission", "4", five)).toMatch(/member aa5 of node 5 is not healthy/);
    five[4] = member("5");
    expect(checkQuorumSafe("decommission", { nodeId: "4" }, five)).toEqual({
      member: true,
      healthyVotersAfter: 4,
      quorumAfter: 3,
    });
    // By member ID, as RemoveConsensusMember names it.
    expect(checkQuorumSafe("remove-member", { memberId: "aa4" }, five).quorumAfter).toBe(3);
  });

  it("lets a learner be removed, and passes a node without an etcd member", () => {
    const withLearner = [...voters(2), member("3", LEARNER, UNREACHABLE)];
    expect(checkQuorumSafe("remove-consensus-role", { nodeId: "3" }, withLearner)).toEqual({
      member: true,
      healthyVotersAfter: 2,
      quorumAfter: 2,
    });
    expect(checkQuorumSafe("reboot", { nodeId: "9" }, voters(1))).toEqual({
      member: false,
      healthyVotersAfter: 1,
      quorumAfter: 1,
    });
  });
});
