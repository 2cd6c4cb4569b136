/**
 * Revoked etcd peer certificates (issue 11): a member whose node was deleted
 * cannot rejoin raft, not even from its own intact data: every other member
 * refuses its TLS connections, after reading the etcd CA's new CRL from etcd
 * into the file etcd checks (`--peer-crl-file`), without restarting.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { ConsensusService, localTimings, type JoinCluster } from "@metropolis/consensus";
import { waitFor } from "@metropolis/event";
import { parseCertificate, parseCrl } from "@metropolis/pki";
import { eventually, testHarness, type TestHarness } from "@metropolis/supervisor/testing";
import { runTestMember, testNode, type TestNode } from "@metropolis/consensus/testing";

const harnesses: TestHarness[] = [];
const nodes: TestNode[] = [];
afterAll(async () => {
  for (const h of harnesses.splice(0).reverse()) await h.cleanup({ timeoutMs: 20_000 });
  for (const n of nodes.splice(0)) await n.remove();
});

async function newNode(name: string): Promise<TestNode> {
  const n = await testNode(name);
  nodes.push(n);
  return n;
}

/** The serial of `node`'s peer certificate, from its durable copy. */
async function peerSerial(node: TestNode): Promise<bigint> {
  const pem = await readFile(node.storage.data.etcd.peerPKI.certificate.fullPath, "utf8");
  return parseCertificate(pem).serial;
}

/** The CRL etcd of `node` reads. */
async function crlOf(node: TestNode) {
  return parseCrl(await readFile(join(node.storage.ephemeral.consensus.fullPath, "peer-crl.der")));
}

/** Runs a member on `node`'s data under its own harness (a restarted node); not awaited. */
function restart(node: TestNode) {
  const service = new ConsensusService({
    nodeId: node.nodeId,
    nodePrivateKey: node.privateKey,
    storage: node.storage,
    peer: node.peer,
    timings: localTimings,
  });
  const harness = testHarness(async (ctx) => {
    ctx.run("consensus", service.run);
    ctx.healthy();
    await ctx.untilAborted();
  });
  return { service, harness };
}

it("keeps a deleted member's etcd out of raft, even with its data", async () => {
  const [a, b, c] = [await newNode("pa"), await newNode("pb"), await newNode("pc")];
  const first = await runTestMember(a, { bootstrap: true });
  harnesses.push(first.harness);
  const members = [];
  for (const joiner of [b, c]) {
    const joinData: JoinCluster = await first.status.addNode(
      joiner.nodeId,
      joiner.publicKey,
      joiner.peer,
    );
    // The joiner gets the CRL with its join data, so its etcd checks peers from the start.
    expect(parseCrl(joinData.crl).entries).toEqual([]);
    members.push(await runTestMember(joiner, { join: joinData }));
    await eventually(
      async () => (await first.status.members()).every((m) => !m.isLearner && m.name !== ""),
      "every learner promoted",
    );
  }
  const [memberB, memberC] = members as [
    Awaited<ReturnType<typeof runTestMember>>,
    Awaited<ReturnType<typeof runTestMember>>,
  ];
  harnesses.push(memberB.harness);
  const serial = await peerSerial(c);
  for (const n of [a, b, c]) expect((await crlOf(n)).isRevoked(serial)).toBe(false);

  // Control: c restarted on its data is let back in.
  await memberC.harness.cleanup({ timeoutMs: 20_000 });
  const before = restart(c);
  await waitFor(before.service.status, (s) => s.state === "running", AbortSignal.timeout(20_000));
  await before.harness.cleanup({ timeoutMs: 20_000 });

  // c's node is deleted (as DeleteNode does it): its peer certificate is revoked, and
  // its member removed; the other members follow the CRL into the file their etcd reads.
  expect(await first.status.revokeNode(c.nodeId)).toBe(1);
  expect(await first.status.removeNode(c.nodeId)).toBe(true);
  for (const n of [a, b]) {
    await eventually(async () => (await crlOf(n)).isRevoked(serial), `${n.nodeId}'s CRL file`);
  }

  // c comes back on its intact data: every connection it opens is refused for the
  // revocation, so it does not even get back in to hear that it was removed (which a
  // removed member with a valid certificate hears at once: see service.test.ts).
  const after = restart(c);
  harnesses.push(after.harness);
  const refusedFor = (h: TestHarness) =>
    h.supervisor
      .logs("root.consensus.etcd")
      .some((l) => l.message === "rejected connection" && /revoked/.test(String(l.meta?.error)));
  await eventually(
    () => refusedFor(first.harness) && refusedFor(memberB.harness),
    "both members to refuse the revoked peer",
  );
  await expect(
    waitFor(after.service.status, (s) => s.state !== "stopped", AbortSignal.timeout(5_000)),
  ).rejects.toThrow();
  // The others serve on, as a cluster of two.
  await first.status.client.sub("curator").kv.put("still").value("serving");
  expect(await first.status.confirmMember()).toBe(true);
  expect((await first.status.members()).map((m) => m.name).sort()).toEqual(
    [a.nodeId, b.nodeId].sort(),
  );
}, 120_000);
