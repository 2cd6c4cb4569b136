/**
 * The order of `cluster rolling-reboot`: workers first (as many at once as
 * --max-unavailable), then each consensus member alone, the curator leader
 * last of all; only UP nodes, and only those asked for.
 */
import { api, common } from "@metropolis/proto";
import { UsageError } from "../src/errors";
import { rollingRebootPlan, type RebootTarget } from "../src/rolling-reboot";

const id = (i: number) => `metropolis-${i.toString(16).padStart(32, "0")}`;

function node(i: number, member: boolean, state = common.NodeState.UP): api.Node {
  return api.Node.fromPartial({
    id: id(i),
    state,
    roles: member ? { consensusMember: {} } : {},
    status: { bootId: `boot-${i}` },
  });
}

const ids = (steps: RebootTarget[][]) => steps.map((s) => s.map((t) => t.id));

// Members 1, 2, 3 (2 leads), workers 4, 5, 6, and 7 NEW.
const cluster = [
  node(3, true),
  node(2, true),
  node(1, true),
  node(6, false),
  node(5, false),
  node(4, false),
  node(7, false, common.NodeState.NEW),
];

describe("rollingRebootPlan", () => {
  it("reboots workers first, then each member alone, the curator leader last; skips nodes not UP", () => {
    const steps = rollingRebootPlan(cluster, id(2), undefined, 1);
    expect(ids(steps)).toEqual([[id(4)], [id(5)], [id(6)], [id(1)], [id(3)], [id(2)]]);
    expect(steps.flat().find((t) => t.id === id(2))).toEqual({
      id: id(2),
      member: true,
      leader: true,
      bootId: "boot-2",
    });
  });

  it("batches workers by --max-unavailable, never members", () => {
    const steps = rollingRebootPlan(cluster, id(2), undefined, 2);
    expect(ids(steps)).toEqual([[id(4), id(5)], [id(6)], [id(1)], [id(3)], [id(2)]]);
  });

  it("reboots only the nodes asked for, in the same order", () => {
    const steps = rollingRebootPlan(cluster, id(2), [id(2), id(5), id(3)], 1);
    expect(ids(steps)).toEqual([[id(5)], [id(3)], [id(2)]]);
  });

  it("refuses a node that is not in the cluster or not UP, naming it", () => {
    expect(() => rollingRebootPlan(cluster, id(2), [id(9)], 1)).toThrow(
      new UsageError(`--nodes: node ${id(9)} is not in the cluster`),
    );
    expect(() => rollingRebootPlan(cluster, id(2), [id(7)], 1)).toThrow(
      new UsageError(`--nodes: node ${id(7)} is NEW: only UP nodes are rebooted`),
    );
  });
});
