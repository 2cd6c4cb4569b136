/**
 * Membership reconciliation against a real leader (one-member etcd, a
 * bootstrapped cluster: startLeader of @metropolis/curator/testing), and for the removal of a
 * started member, a second real etcd member joined to it.
 *
 * Learners added here for made-up addresses never start: etcd only tries to
 * reach them, which is all these tests need.
 */
import type { IMember } from "etcd3";
import { runTestMember, testNode } from "@metropolis/consensus/testing";
import { common, priv } from "@metropolis/proto";
import { nodeKey } from "../src/keys";
import type { LeaderContext } from "../src/leader-context";
import {
  membershipReconciler,
  planMembershipChange,
  reconcileMembership,
} from "../src/membership-reconciler";
import { encodeNode } from "../src/node-record";
import { startLeader, type LeaderFixture } from "@metropolis/curator/testing";
import { eventually } from "@metropolis/supervisor/testing";

let leader: LeaderFixture;
let ctx: LeaderContext;

beforeAll(async () => {
  leader = await startLeader();
  ctx = leader.ctx;
});
afterAll(() => leader?.stop());

/** A loopback address of its own per call, so that peer URLs never collide. */
let nextHost = 10;
const freshHost = () => `127.0.${Math.floor(Math.random() * 200) + 20}.${nextHost++}`;

const peerUrl = (host: string) => `https://${host}:7834`;

/** The consensus member role as a record holds it before join data was written to it. */
const consensusRole = (): common.NodeRoles => ({
  consensusMember: common.NodeRoles_ConsensusMember.create(),
});

/** Gives node `id` the consensus member role (or takes it away) and, if given, an external address. */
async function setMember(id: string, member: boolean, host?: string): Promise<void> {
  await leader.updateNode(id, (node) => ({
    ...node,
    roles: {
      ...node.roles,
      consensusMember: member
        ? (node.roles?.consensusMember ?? common.NodeRoles_ConsensusMember.create())
        : undefined,
    },
    status:
      host === undefined
        ? node.status
        : common.NodeStatus.fromPartial({ ...node.status, externalAddress: host }),
  }));
}

/** A new UP node holding the consensus member role, reachable at a fresh address. */
async function roleHolder(): Promise<{ nodeId: string; host: string }> {
  const node = await leader.addNode({ roles: consensusRole() });
  const host = freshHost();
  await setMember(node.nodeId, true, host);
  return { nodeId: node.nodeId, host };
}

const members = () => ctx.consensus.members();
const memberAt = (ms: IMember[], host: string) =>
  ms.find((m) => m.peerURLs.includes(peerUrl(host)));

describe("reconcileMembership", () => {
  it("does nothing when membership matches the roles", async () => {
    expect(await members()).toHaveLength(1);
    expect(await reconcileMembership(ctx)).toBeUndefined();
  });

  it("adds a learner for a role holder without a member, then waits for it to join", async () => {
    const { nodeId, host } = await roleHolder();
    expect(await reconcileMembership(ctx)).toMatch(`added node ${nodeId}`);
    const learner = memberAt(await members(), host);
    expect(learner).toMatchObject({ isLearner: true, name: "" });
    // The node finds in its role what it needs to start its member.
    const role = (await leader.getNode(nodeId))!.roles!.consensusMember!;
    expect(role.peers).toContainEqual({ name: nodeId, peerUrl: peerUrl(host) });
    expect(role.peers).toContainEqual(expect.objectContaining({ name: leader.firstNode.nodeId }));
    expect(role.peerCertificate.length).toBeGreaterThan(0);
    expect(role.caCertificate.length).toBeGreaterThan(0);
    // The learner is claimed by its node: nothing more to do.
    expect(await reconcileMembership(ctx)).toBeUndefined();

    // The node loses the role before its learner ever started: it is removed by peer URL.
    await setMember(nodeId, false);
    expect(await reconcileMembership(ctx)).toMatch(`removed unstarted learner`);
    expect(memberAt(await members(), host)).toBeUndefined();
    expect(await reconcileMembership(ctx)).toBeUndefined();
    await leader.deleteNode(nodeId);
  }, 60_000);

  it("makes one change per pass: two discrepancies take two passes", async () => {
    // A learner no node accounts for (its node's record is gone), and a role holder without a member.
    const orphanHost = freshHost();
    const orphan = await leader.addNode({ roles: consensusRole() });
    await ctx.consensus.addNode(orphan.nodeId, orphan.publicKey, { host: orphanHost });
    await leader.deleteNode(orphan.nodeId);
    const { nodeId, host } = await roleHolder();

    // Removal first: the pending learner would block the addition anyway (one learner at a time).
    const first = await reconcileMembership(ctx);
    expect(first).toMatch(`removed unstarted learner`);
    expect(first).toMatch(peerUrl(orphanHost));
    let ms = await members();
    expect(memberAt(ms, orphanHost)).toBeUndefined();
    expect(memberAt(ms, host)).toBeUndefined();

    expect(await reconcileMembership(ctx)).toMatch(`added node ${nodeId}`);
    ms = await members();
    expect(memberAt(ms, host)).toMatchObject({ isLearner: true });
    expect(ms).toHaveLength(2);
    expect(await reconcileMembership(ctx)).toBeUndefined();

    // Deleting the node leaves its learner to the reconciler.
    await leader.deleteNode(nodeId);
    expect(await reconcileMembership(ctx)).toMatch(peerUrl(host));
    expect(await members()).toHaveLength(1);
  }, 60_000);

  it("with state, removes an unclaimed learner only on the second pass that sees it", async () => {
    // As UpdateNodeRoles leaves it between adding the learner and writing the role.
    const { nodeId, host } = await roleHolder();
    await setMember(nodeId, false);
    await ctx.consensus.addNode(nodeId, (await leader.getNode(nodeId))!.publicKey, { host });
    const unclaimedLearners = new Set<string>();
    expect(await reconcileMembership(ctx, { unclaimedLearners })).toBeUndefined();
    expect(unclaimedLearners.size).toBe(1);

    // The role write lands: the learner is claimed, and forgotten as unclaimed.
    await setMember(nodeId, true);
    expect(await reconcileMembership(ctx, { unclaimedLearners })).toBeUndefined();
    expect(unclaimedLearners.size).toBe(0);

    // Had it not: two passes.
    await setMember(nodeId, false);
    expect(await reconcileMembership(ctx, { unclaimedLearners })).toBeUndefined();
    expect(await reconcileMembership(ctx, { unclaimedLearners })).toMatch(peerUrl(host));
    expect(await members()).toHaveLength(1);
    await leader.deleteNode(nodeId);
  }, 60_000);

  it("removes a started member whose node lost the role, but never its own or the last voter", async () => {
    const self = leader.firstNode.nodeId;
    // Neither its own member nor the last voter, whatever the records say.
    await setMember(self, false);
    expect(await reconcileMembership(ctx)).toBeUndefined();
    const asAnother: LeaderContext = {
      ...ctx,
      self: { ...ctx.self, nodeId: "metropolis-00000000000000000000000000000000" },
    };
    expect(await reconcileMembership(asAnother)).toBeUndefined();
    await setMember(self, true);

    // A second, real member: its record holds the role, and etcd names it once it started.
    const node = await testNode("reconciled");
    try {
      const record = priv.Node.fromPartial({
        publicKey: Buffer.from(node.publicKey),
        state: common.NodeState.UP,
        roles: consensusRole(),
        status: { externalAddress: node.peer.host },
      });
      const txn = ctx.leadership
        .txn()
        .then(ctx.kv.put(nodeKey(node.nodeId)).value(encodeNode(record)));
      expect(await ctx.leadership.commit(txn)).toBe(true);
      const join = await ctx.consensus.addNode(node.nodeId, node.publicKey, node.peer);
      // Its etcd exits once it is removed from the cluster.
      const second = await runTestMember(node, { join }, { expectEtcdDeath: true });
      try {
        await eventually(
          async () => (await members()).some((m) => m.name === node.nodeId && !m.isLearner),
          "the second member is a voter",
        );
        // Matched by name (its peer port is not the default one the address would give).
        expect(await reconcileMembership(ctx)).toBeUndefined();

        const id = (await members()).find((m) => m.name === node.nodeId)!.ID;
        await setMember(node.nodeId, false);
        expect(await reconcileMembership(ctx)).toBe(
          `removed voter ${node.nodeId} (${id}) from consensus: its node no longer has the consensus member role`,
        );
        expect((await members()).map((m) => m.name)).toEqual([self]);
        expect(await reconcileMembership(ctx)).toBeUndefined();
      } finally {
        await second.harness.cleanup();
      }
    } finally {
      await node.remove();
    }
  }, 90_000);
});

describe("planMembershipChange", () => {
  const member = (over: Partial<IMember>): IMember => ({
    ID: "1",
    name: "",
    peerURLs: [],
    clientURLs: [],
    isLearner: false,
    ...over,
  });

  it("never removes the last voter, even of a node without the role", () => {
    const lone = member({ ID: "7", name: "metropolis-gone" });
    expect(planMembershipChange("metropolis-self", [], [lone])).toBeUndefined();
    const two = [lone, member({ ID: "8", name: "metropolis-self" })];
    expect(planMembershipChange("metropolis-self", [], two)).toMatchObject({
      kind: "remove",
      member: { ID: "7" },
      reason: "its node no longer exists",
    });
  });
});

describe("membershipReconciler", () => {
  it("repairs membership in the background, logs the change and stops on abort", async () => {
    const infos: string[] = [];
    const logger = Object.create(ctx.logger, {
      info: { value: (msg: string) => infos.push(msg) },
    }) as LeaderContext["logger"];
    const stop = new AbortController();
    const { nodeId, host } = await roleHolder();
    const running = membershipReconciler({ ...ctx, logger }, 50, stop.signal);
    try {
      // Logged once the pass is complete, the join data written to the role.
      await eventually(
        () => infos.some((m) => m.includes(`added node ${nodeId}`)),
        "the addition is logged",
      );
      expect(memberAt(await members(), host)).toMatchObject({ isLearner: true });
      await leader.deleteNode(nodeId);
      // The runner holds an unclaimed learner back for one pass, then removes it.
      await eventually(
        async () => memberAt(await members(), host) === undefined,
        "the learner is removed",
      );
    } finally {
      stop.abort();
      await running;
    }
    expect(await members()).toHaveLength(1);
  }, 60_000);
});
