/**
 * A former member's etcd data after its cluster was restored from a backup
 * (stale-member.ts): the decision alone (same cluster → keep; another cluster
 * counting this node → wipe; anything unknown → retry, keeping the data),
 * then against real etcd processes with peer TLS: cluster A of members a and
 * b, a's snapshot restored on c as cluster C (same etcd CA, new cluster ID),
 * and b's data checked against A (keep), against C before and after C added
 * b (retry, then wipe), against C stopped (retry); wiped, b joins C as a
 * learner and is promoted.
 */
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { certificatePemCodec, generateKeyPair } from "@metropolis/pki";
import { snapshotMemberToFile, TestMembers, type TestMember } from "@metropolis/consensus/testing";
import { eventually } from "@metropolis/supervisor/testing";
import { MemberIdentityError } from "../src/errors";
import { localTimings } from "../src/etcd-flags";
import { unwrapKeyring } from "../src/keyring-wrap";
import { hasMemberData } from "../src/member-data";
import { restoreMember } from "../src/restore-member";
import {
  checkMemberData,
  decideMemberData,
  readMemberIdentity,
  wipeMemberData,
  type ClusterAnswer,
} from "../src/stale-member";

jest.setTimeout(180_000);

const fixture = new TestMembers();
afterEach(() => fixture.cleanup());

describe("decideMemberData", () => {
  const own = "https://127.0.0.9:7834";
  const local = { clusterId: 0xaaan, memberId: 0x1n };
  const answer = (clusterId: bigint, urls: string[]): ClusterAnswer => ({
    peerUrl: "https://127.0.0.8:7834",
    clusterId,
    memberPeerUrls: urls,
  });

  it("keeps the data of the cluster it is told to join", () => {
    expect(decideMemberData(local, [answer(0xaaan, [own])], own)).toMatchObject({
      action: "keep",
      reason: expect.stringMatching(/belongs to cluster aaa .*restarts from it/),
    });
  });

  it("wipes the data of another cluster that counts this node as a member", () => {
    expect(
      decideMemberData(local, [answer(0xbbbn, ["https://127.0.0.8:7834", own])], own),
    ).toMatchObject({
      action: "wipe",
      reason: expect.stringMatching(/cluster aaa .*answers for cluster bbb, which counts/),
    });
  });

  it("keeps the data when any member answers for its cluster, whatever another says", () => {
    const other = answer(0xbbbn, [own]);
    expect(decideMemberData(local, [other, answer(0xaaan, [])], own)).toMatchObject({
      action: "keep",
    });
  });

  it("retries, keeping the data, whenever it cannot tell", () => {
    // Another cluster, but one that has not added this node: not told to join it.
    expect(
      decideMemberData(local, [answer(0xbbbn, ["https://127.0.0.8:7834"])], own),
    ).toMatchObject({
      action: "retry",
      reason: expect.stringMatching(/has no member at .*data is kept/),
    });
    // Nobody answered.
    expect(decideMemberData(local, [], own)).toMatchObject({
      action: "retry",
      reason: expect.stringMatching(/no member .* answered.*data is kept/),
    });
    // The local data's identity does not read.
    expect(
      decideMemberData(
        new MemberIdentityError("/x/wal", "no WAL segment"),
        [answer(0xbbbn, [own])],
        own,
      ),
    ).toMatchObject({
      action: "retry",
      reason: expect.stringMatching(/no WAL segment; the data is kept/),
    });
  });
});

const clusterIdOf = async (member: TestMember) =>
  BigInt((await member.status.client.kv.get("x").exec()).header.cluster_id);

it("keeps a member's data for its own cluster, and wipes it only for a restored one that added it", async () => {
  const a = await fixture.node("sa");
  const b = await fixture.node("sb");
  const first = await fixture.run(a, { bootstrap: true, timings: localTimings });
  const bMember = await fixture.join(first, b);
  const clusterA = await clusterIdOf(first);
  const url = (n: { peer: { host: string; port: number } }) =>
    `https://${n.peer.host}:${n.peer.port}`;

  // What b's consensus role would hold (addNode is idempotent), asked while A has its quorum.
  const sameJoin = await first.status.addNode(b.nodeId, b.publicKey, b.peer);
  // The WAL's record of the cluster, read without etcd running.
  await fixture.stop(bMember);
  const identity = await readMemberIdentity(b.storage);
  expect(identity.clusterId).toBe(clusterA);
  const bMemberId = (await first.status.members()).find((m) => m.name === b.nodeId)?.ID;
  expect(identity.memberId.toString()).toBe(bMemberId);

  // Told to join the cluster it is a member of: keep.
  const same = await checkMemberData({
    storage: b.storage,
    join: sameJoin,
    nodePrivateKey: b.privateKey,
    ownPeerUrl: url(b),
    localAddress: b.peer.host,
  });
  expect(same).toMatchObject({ action: "keep" });

  // A's snapshot restored on c: cluster C, same etcd CA, a new cluster ID.
  const owner = generateKeyPair();
  const keyring = unwrapKeyring(
    first.status.wrapKeyringFor(owner.publicKey, "t"),
    owner.privateKey,
    "t",
  );
  const snapshotPath = join(a.dir, "snapshot.db");
  await snapshotMemberToFile(first.status.clientSocket, snapshotPath);
  await fixture.stop(first);
  const c = await fixture.node("sc");
  await restoreMember(
    {
      storage: c.storage,
      nodePrivateKey: c.privateKey,
      peer: c.peer,
      keyring,
      snapshotPath,
      timings: localTimings,
    },
    async () => undefined,
  );
  const restored = await fixture.run(c, { timings: localTimings });
  const clusterC = await clusterIdOf(restored);
  expect(clusterC).not.toBe(clusterA);

  // C answers, but has not added b: b is not told to join it. Its own (old) certificate of the
  // same CA is what it would present.
  const oldCertificate = await b.storage.data.etcd.peerPKI.certificate
    .as(certificatePemCodec)
    .read();
  const notAdded = await checkMemberData({
    storage: b.storage,
    join: {
      ...sameJoin,
      peers: [{ name: c.nodeId, peerUrl: url(c) }],
      certificate: oldCertificate,
    },
    nodePrivateKey: b.privateKey,
    ownPeerUrl: url(b),
    localAddress: b.peer.host,
  });
  expect(notAdded).toMatchObject({
    action: "retry",
    reason: expect.stringMatching(/has no member at/),
  });

  // C adds b as a learner (as its curator does for the consensus role): the proof.
  const join2 = await restored.status.addNode(b.nodeId, b.publicKey, b.peer);
  const stale = await checkMemberData({
    storage: b.storage,
    join: join2,
    nodePrivateKey: b.privateKey,
    ownPeerUrl: url(b),
    localAddress: b.peer.host,
  });
  expect(stale).toMatchObject({
    action: "wipe",
    reason: expect.stringContaining(
      `answers for cluster ${clusterC.toString(16)}, which counts ${url(b)}`,
    ),
  });

  // A cluster of another etcd CA (a fresh one, not a restore) proves nothing: its member's
  // certificate does not verify against the CA b's data trusts.
  const d = await fixture.node("sd");
  const foreign = await fixture.run(d, { bootstrap: true, timings: localTimings });
  const foreignJoin = await foreign.status.addNode(b.nodeId, b.publicKey, b.peer);
  const unverified = await checkMemberData({
    storage: b.storage,
    join: foreignJoin,
    nodePrivateKey: b.privateKey,
    ownPeerUrl: url(b),
    localAddress: b.peer.host,
  });
  expect(unverified).toMatchObject({
    action: "retry",
    reason: expect.stringMatching(/no member .* answered/),
  });
  await fixture.stop(foreign);

  // Wiped (only etcd's data directory) and joined: a learner of C, promoted.
  await wipeMemberData(b.storage);
  expect(await hasMemberData(b.storage)).toBe(false);
  expect(await readdir(b.storage.data.etcd.peerPKI.fullPath)).not.toHaveLength(0);
  const rejoined = await fixture.run(b, { join: join2, timings: localTimings });
  await eventually(
    async () => {
      const members = await restored.status.members();
      return members.length === 2 && members.every((m) => !m.isLearner && m.name !== "");
    },
    "b a voting member of C",
    { timeoutMs: 30_000 },
  );
  expect((await readMemberIdentity(b.storage)).clusterId).toBe(clusterC);
  expect(await clusterIdOf(rejoined)).toBe(clusterC);

  // C stopped: nobody answers, the data is kept.
  await fixture.stop(rejoined);
  await fixture.stop(restored);
  const unknown = await checkMemberData({
    storage: b.storage,
    join: join2,
    nodePrivateKey: b.privateKey,
    ownPeerUrl: url(b),
    localAddress: b.peer.host,
    timeoutMs: 1000,
  });
  expect(unknown).toMatchObject({ action: "retry", reason: expect.stringMatching(/ECONNREFUSED/) });
  expect(await hasMemberData(b.storage)).toBe(true);
});
