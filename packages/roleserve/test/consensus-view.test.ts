/**
 * The consensus view reader: the local member's list (hex IDs, sorted) and
 * raft leader, read while the node runs a control plane, dropped when it
 * stops running one, and no view from a member that does not answer in
 * time. The member is a stand-in: what it answers is etcd's (etcd3's
 * decimal IDs); the real member is read in the e2e health test.
 */
import { MemoryValue } from "@metropolis/event";
import { eventually, MockContext } from "@metropolis/supervisor/testing";
import { ConsensusViewReader, readConsensusView, type MemberReads } from "../src/consensus-view";

/** A member that lists `ids` (decimal, as etcd3 gives them) and follows `leader` (hex), after `delayMs`. */
function member(ids: string[], leader: string | undefined, delayMs = 0): MemberReads {
  const later = <T>(value: T) =>
    new Promise<T>((resolve) => setTimeout(() => resolve(value), delayMs));
  return {
    members: () =>
      later(ids.map((ID) => ({ ID, name: "", peerURLs: [], clientURLs: [], isLearner: false }))),
    raftStatus: () =>
      later({
        memberId: "1",
        leaderId: leader,
        raftTerm: 7,
        isLearner: false,
        connectedPeers: undefined,
      }),
  };
}

it("reads the member's IDs as hex, sorted, with the raft leader it follows", async () => {
  const view = await readConsensusView(member(["255", "16", "4096"], "ff"));
  expect(view).toEqual({ memberIds: ["1000", "10", "ff"].sort(), raftLeaderId: "ff", raftTerm: 7 });
  expect((await readConsensusView(member(["1"], undefined))).raftLeaderId).toBe("");
  await expect(readConsensusView(member(["1"], "1", 500), 50)).rejects.toThrow(
    "the etcd member did not answer within 50 ms",
  );
});

it("keeps the latest view while the node runs a control plane, none otherwise", async () => {
  const values = {
    localControlPlane: new MemoryValue<{ consensus: MemberReads } | undefined>(),
  };
  const reader = new ConsensusViewReader(values, { intervalMs: 20 });
  const ctx = new MockContext("root.consensusview");
  const running = reader.run(ctx);
  try {
    expect(reader.latest()).toBeUndefined();
    values.localControlPlane.set({ consensus: member(["2", "1"], "1") });
    await eventually(() => reader.latest(), "a view");
    expect(reader.latest()).toEqual({ memberIds: ["1", "2"], raftLeaderId: "1", raftTerm: 7 });
    values.localControlPlane.set(undefined);
    await eventually(() => reader.latest() === undefined, "the view dropped");
  } finally {
    ctx.abort();
    await running;
  }
});
