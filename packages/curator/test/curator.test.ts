/**
 * Three curators on one etcd: they agree on one leader, tell clients where
 * it is through any of them, and a new leader takes over within the lease
 * TTL when the leader stops. A curator whose election lease is lost fails
 * with CandidacyLostError, and its restart campaigns again.
 */
import {
  freePort,
  runTestMember,
  testNode,
  type TestMember,
  type TestNode,
} from "@metropolis/consensus/testing";
import {
  CertificateAuthority,
  generateKeyPair,
  nodeIdFromPublicKey,
  tlsMaterial,
} from "@metropolis/pki";
import { testHarness, type TestHarness } from "@metropolis/supervisor/testing";
import { waitFor } from "@metropolis/event";
import { Curator } from "../src/curator";
import { CandidacyLostError } from "../src/errors";
import { leaderPrefix } from "../src/keys";
import { status, type ServiceError } from "@grpc/grpc-js";
import { curator } from "@metropolis/proto";
import { CuratorConnection, unaryCall } from "../src/curator-client";
import { electionKeys, type CuratorEndpoint } from "../src/leadership";

let node: TestNode;
let member: TestMember;
let ca: CertificateAuthority;
const harnesses: TestHarness[] = [];

beforeAll(async () => {
  node = await testNode("curators");
  member = await runTestMember(node, { bootstrap: true });
  ca = await CertificateAuthority.create();
});
afterAll(async () => {
  for (const h of harnesses) await h.cleanup({ timeoutMs: 10_000 }).catch(() => undefined);
  await member.harness.cleanup();
  await node.remove();
});

interface RunningCurator {
  curator: Curator;
  harness: TestHarness;
  endpoint: CuratorEndpoint;
}

/** Starts a curator under a harness of its own; `expectDeath`: the test makes it fail on purpose. */
async function startCurator(host: string, expectDeath = false): Promise<RunningCurator> {
  const keys = generateKeyPair();
  const nodeId = nodeIdFromPublicKey(keys.publicKey);
  const certificate = await ca.issueNodeCertificate(keys.publicKey, { ipAddresses: [host] });
  const port = await freePort(host);
  const curator = new Curator({
    nodeId,
    tls: tlsMaterial({ certificate, privateKey: keys.privateKey, ca: ca.certificate }),
    host,
    port,
    consensus: member.status,
    leaderTtlSeconds: 1,
  });
  const harness = testHarness(
    async (ctx) => {
      ctx.run("curator", curator.run);
      ctx.healthy();
      await ctx.untilAborted();
    },
    { expectDeath: (dn) => expectDeath && dn === "root.curator" },
  );
  harnesses.push(harness);
  await harness.waitFor("root.curator", "healthy");
  return { curator, harness, endpoint: { nodeId, host, port } };
}

describe("curators", () => {
  it("agree on one leader, which clients find through any curator, and fail over when it stops", async () => {
    const base = 2 + Math.floor(Math.random() * 200);
    const curators: RunningCurator[] = [];
    for (let i = 0; i < 3; i++) curators.push(await startCurator(`127.0.0.${base + i}`));
    const leader = curators[0];

    // Every curator sees the first as leader.
    for (const c of curators) {
      expect(
        await waitFor(
          c.curator.leader,
          (l) => l?.nodeId === leader.endpoint.nodeId,
          AbortSignal.timeout(10_000),
        ),
      ).toEqual(leader.endpoint);
    }
    // A client that only knows a follower finds the leader.
    const follower = curators[2];
    const conn = new CuratorConnection({
      endpoints: [follower.endpoint],
      ca: ca.certificate.toPem(),
    });
    try {
      expect(await conn.leader(10_000)).toEqual(leader.endpoint);

      // The leader stops; one of the others takes over once its lease expires
      // (how fast is bench:curator's to measure, not a busy machine's test).
      await leader.harness.cleanup();
      harnesses.splice(harnesses.indexOf(leader.harness), 1);
      const remaining = curators.slice(1);
      const views = await Promise.all(
        remaining.map((c) =>
          waitFor(
            c.curator.leader,
            (l) => l !== undefined && l.nodeId !== leader.endpoint.nodeId,
            AbortSignal.timeout(10_000),
          ),
        ),
      );
      // Exactly one new leader, the same for both.
      expect(new Set(views.map((v) => v!.nodeId)).size).toBe(1);
      expect(remaining.map((c) => c.endpoint.nodeId)).toContain(views[0]!.nodeId);
      // The client follows, once told its leader is gone.
      conn.close();
      expect((await conn.leader(10_000)).nodeId).toBe(views[0]!.nodeId);

      // The new leader serves the cluster's APIs (a follower would answer UNIMPLEMENTED): a
      // node certificate of this CA is checked against the node records, where it has none.
      const keys = generateKeyPair();
      const certificate = await ca.issueNodeCertificate(keys.publicKey);
      const asNode = new CuratorConnection({
        endpoints: [follower.endpoint],
        ca: ca.certificate.toPem(),
        identity: tlsMaterial({ certificate, privateKey: keys.privateKey, ca: ca.certificate }),
      });
      try {
        const refused = await asNode
          .call((l) =>
            unaryCall<curator.GetConsensusStatusRequest, curator.GetConsensusStatusResponse>(
              l.curator.getConsensusStatus.bind(l.curator),
              {},
            ),
          )
          .then(
            () => undefined,
            (e: unknown) => e as ServiceError,
          );
        expect(refused?.code).toBe(status.PERMISSION_DENIED);
        expect(refused?.details).toMatch(/is not part of the cluster/);
      } finally {
        asNode.close();
      }
    } finally {
      conn.close();
    }
  }, 60_000);

  it("a curator whose lease is lost fails, and its restart campaigns again behind the others", async () => {
    for (const h of harnesses.splice(0)) await h.cleanup({ timeoutMs: 10_000 });
    const base = 2 + Math.floor(Math.random() * 200);
    const first = await startCurator(`127.0.0.${base}`, true);
    const isFirst = (l: CuratorEndpoint | undefined) => l?.nodeId === first.endpoint.nodeId;
    await waitFor(first.curator.leader, isFirst, AbortSignal.timeout(10_000));
    const second = await startCurator(`127.0.0.${base + 1}`);
    await waitFor(second.curator.leader, isFirst, AbortSignal.timeout(10_000));
    const kv = member.status.client.sub("curator").kv;
    const [leaderKey] = await electionKeys(kv);

    // The leader's lease is revoked under it, as when etcd expired it.
    const died = first.harness.nextTransition((t) => t.dn === "root.curator" && t.to === "dead");
    await kv.leaseClient.leaseRevoke({ ID: leaderKey.slice(leaderPrefix.length) });
    expect((await died).error).toBeInstanceOf(CandidacyLostError);

    // The follower leads; the first curator, restarted, follows it under a new election key.
    const isSecond = (l: CuratorEndpoint | undefined) => l?.nodeId === second.endpoint.nodeId;
    await waitFor(second.curator.leader, isSecond, AbortSignal.timeout(10_000));
    await waitFor(first.curator.leader, isSecond, AbortSignal.timeout(10_000));
    await first.harness.waitFor("root.curator", "healthy");
    const keys = await electionKeys(kv);
    expect(keys).toHaveLength(2);
    expect(keys).not.toContain(leaderKey);
  }, 60_000);
});
