/**
 * The checks of a run's own records (`checkAnswers`): an INTERNAL answer to
 * the workload or to the nemesis fails the run, naming the call and the
 * curator that served it — seed 7 on the testbed found a leader shutting
 * down answering INTERNAL (its etcd client already closed); a fault that
 * could not be made or healed fails it too; a run without either passes.
 */
import { checkAnswers } from "../src/invariants";
import type { FaultRecord } from "../src/nemesis";
import { HistoryBuilder } from "./histories";

const fault = (error?: string): FaultRecord => ({
  kind: "member-change",
  category: "membership",
  node: "node6",
  start: 249_400,
  end: 260_000,
  label: "consensus role on node6",
  ...(error === undefined ? {} : { error }),
});

describe("checkAnswers", () => {
  it("passes a run without INTERNAL answers and with every fault healed", () => {
    const h = new HistoryBuilder();
    h.write("c1", "n/a", "x", 0, 10);
    h.write("c1", "n/a", "y", 20, 30, "unknown");
    expect(checkAnswers(h.ops, [fault()])).toEqual([
      expect.objectContaining({ name: "no call answered INTERNAL", ok: true }),
      expect.objectContaining({ name: "every fault made and healed as planned", ok: true }),
    ]);
  });

  it("fails on an INTERNAL answer to the workload or to a fault, and on a fault not made", () => {
    const h = new HistoryBuilder();
    const w = h.write("c2", "n/a", "x", 0, 10, "unknown");
    h.ops[w.id] = {
      ...w,
      error: "INTERNAL: internal error in Management.UpdateNodeLabels",
      servedBy: "node5",
    };
    const refused = fault(
      "could not add: metroctl set-role … failed (exit 1): metroctl: set-role: INTERNAL: internal error in Management.UpdateNodeRoles",
    );
    const [internal, faults] = checkAnswers(h.ops, [refused, fault()]);
    expect(internal.ok).toBe(false);
    expect(internal.detail).toContain(
      "#0 write (served by node5): INTERNAL: internal error in Management.UpdateNodeLabels",
    );
    expect(internal.detail).toContain("consensus role on node6 at 249.4 s");
    expect(faults.ok).toBe(false);
    expect(faults.detail).toMatch(/^1 of 2: consensus role on node6: could not add/);
  });
});
