/**
 * Revoked etcd peer certificates (issue 11): a member whose node was deleted
 * cannot rejoin raft, not even from its own intact data: every other member
 * refuses its TLS connections, after reading the etcd CA's new CRL from etcd
 * into the file etcd checks (`--peer-crl-file`), without restarting.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { waitFor } from "@metropolis/event";
import { parseCertificate, parseCrl } from "@metropolis/pki";
import { eventually, type TestHarness } from "@metropolis/supervisor/testing";
import { TestMembers, type TestNode } from "@metropolis/consensus/testing";

const fixture = new TestMembers();
afterAll(() => fixture.cleanup());

/** The serial of `node`'s peer certificate, from its durable copy. */
async function peerSerial(node: TestNode): Promise<bigint> {
  const pem = await readFile(node.storage.data.etcd.peerPKI.certificate.fullPath, "utf8");
  return parseCertificate(pem).serial;
}

/** The CRL etcd of `node` reads. */
async function crlOf(node: TestNode) {
  return parseCrl(await readFile(join(node.storage.ephemeral.consensus.fullPath, "peer-crl.der")));
}

it("keeps a deleted member's etcd out of raft, even with its data", async () => {
  const [a, b, c] = [await fixture.node("pa"), await fixture.node("pb"), await fixture.node("pc")];
  const first = await fixture.run(a, { bootstrap: true });
  const join = async (joiner: TestNode) => {
    const joinData = await first.status.addNode(joiner.nodeId, joiner.publicKey, joiner.peer);
    // The joiner gets the CRL with its join data, so its etcd checks peers from the start.
    expect(parseCrl(joinData.crl).entries).toEqual([]);
    const member = await fixture.run(joiner, { join: joinData });
    await eventually(
      async () => (await first.status.members()).every((m) => !m.isLearner && m.name !== ""),
      "every learner promoted",
    );
    return member;
  };
  const memberB = await join(b);
  const memberC = await join(c);
  const serial = await peerSerial(c);
  for (const n of [a, b, c]) expect((await crlOf(n)).isRevoked(serial)).toBe(false);

  // Control: c restarted on its data is let back in.
  await fixture.stop(memberC);
  const before = fixture.start(c);
  await waitFor(before.service.status, (s) => s.state === "running", AbortSignal.timeout(20_000));
  await fixture.stop(before);

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
  const after = fixture.start(c);
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
