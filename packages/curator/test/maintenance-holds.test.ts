/**
 * MaintenanceHolds on a test clock: a node held for an allowed action stays
 * held until it reports another boot, its hold is released, or the window
 * ends; and the quorum check counts a held voter as not healthy.
 */
import { common } from "@metropolis/proto";
import { FailedPreconditionError } from "../src/errors";
import { MaintenanceHolds, maintenanceHoldMs } from "../src/maintenance-holds";
import { checkQuorumSafe } from "../src/quorum-safety";

/** A clock the test moves. */
function testClock() {
  let ms = 1_000;
  return { now: () => ms, advance: (by: number) => (ms += by) };
}

const boots = (entries: Record<string, string>) => (id: string) => entries[id];

describe("MaintenanceHolds", () => {
  it("holds a node, naming the action and since when, until the window ends", () => {
    const clock = testClock();
    const holds = new MaintenanceHolds(clock.now);
    holds.hold("n1", "reboot", "boot-a");
    clock.advance(3_400);
    expect(holds.held(boots({ n1: "boot-a" }))).toEqual([
      { nodeId: "n1", reason: "rebooting it was allowed 3 s ago" },
    ]);
    clock.advance(maintenanceHoldMs - 3_401);
    expect(holds.held(boots({ n1: "boot-a" }))).toHaveLength(1);
    clock.advance(1);
    expect(holds.held(boots({ n1: "boot-a" }))).toEqual([]);
  });

  it("ends a hold once its node reports another boot, not while it reports none", () => {
    const clock = testClock();
    const holds = new MaintenanceHolds(clock.now);
    holds.hold("n1", "power-off", "boot-a");
    holds.hold("n2", "decommission", "");
    // Down, or its record without a status yet: still held.
    expect(holds.held(boots({ n1: "", n2: "" })).map((h) => h.nodeId)).toEqual(["n1", "n2"]);
    expect(holds.held(boots({})).map((h) => h.nodeId)).toEqual(["n1", "n2"]);
    // n1 is back with a new boot; n2 reports its first.
    expect(holds.held(boots({ n1: "boot-b", n2: "boot-x" }))).toEqual([]);
  });

  it("ends a hold when released, and a new hold of the same node replaces the old", () => {
    const clock = testClock();
    const holds = new MaintenanceHolds(clock.now);
    holds.hold("n1", "defragment", "boot-a");
    holds.release("n1");
    expect(holds.held(boots({ n1: "boot-a" }))).toEqual([]);
    holds.hold("n1", "reboot", "boot-a");
    clock.advance(maintenanceHoldMs - 1_000);
    holds.hold("n1", "power-off", "boot-a");
    clock.advance(2_000);
    expect(holds.held(boots({ n1: "boot-a" }))).toEqual([
      { nodeId: "n1", reason: "powering off it was allowed 2 s ago" },
    ]);
  });
});

describe("checkQuorumSafe with held nodes", () => {
  const voter = (n: string): common.ConsensusMember => ({
    nodeId: n,
    memberId: `aa${n}`,
    status: common.ConsensusMember_Status.VOTER,
    reachability: common.ConsensusMember_Reachability.REACHABLE,
    curatorRunning: false,
    raftLeader: false,
  });
  const five = ["1", "2", "3", "4", "5"].map(voter);
  const held = [{ nodeId: "2", reason: "rebooting it was allowed 1 s ago" }];

  it("refuses an action on another node while a voter is held, naming it", () => {
    expect(() => checkQuorumSafe("reboot", { nodeId: "1" }, five, held)).toThrow(
      FailedPreconditionError,
    );
    expect(() => checkQuorumSafe("reboot", { nodeId: "1" }, five, held)).toThrow(
      /^rebooting node 1 is refused: voter member aa2 of node 2 is under maintenance: rebooting it was allowed 1 s ago, and etcd may not see it gone yet; /,
    );
  });

  it("lets the held node itself be checked again, and ignores holds of nodes without a member", () => {
    expect(checkQuorumSafe("reboot", { nodeId: "2" }, five, held)).toMatchObject({ member: true });
    const other = [{ nodeId: "9", reason: "rebooting it was allowed 1 s ago" }];
    expect(checkQuorumSafe("reboot", { nodeId: "1" }, five, other)).toMatchObject({
      member: true,
    });
  });
});
