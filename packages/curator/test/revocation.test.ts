/**
 * Revocation (issue 11): deleting a node revokes its certificate in the
 * cluster CA's CRL, and from then on the curator refuses that certificate
 * (UNAUTHENTICATED) on every call; nodes follow the CRL through
 * WatchRevocations. Real etcd, real gRPC over loopback with the curator's
 * mTLS (startLeader of @metropolis/curator/testing).
 */
import { status, type ServiceError } from "@grpc/grpc-js";
import { CertificateAuthority, parseCertificate, parseCrl } from "@metropolis/pki";
import { etcdCertificateKv } from "@metropolis/consensus";
import { api, curator } from "@metropolis/proto";
import { eventually } from "@metropolis/supervisor/testing";
import { curatorServer } from "../src/curator-service";
import { managementServer, managementService } from "../src/management-service";
import { Revocations } from "../src/revocations";
import { startLeader, type LeaderFixture } from "@metropolis/curator/testing";

let leader: LeaderFixture;
beforeAll(async () => {
  leader = await startLeader({
    services: (ctx) => [
      [curator.CuratorService, curatorServer(ctx)],
      [managementService, managementServer(ctx)],
    ],
  });
}, 30_000);
afterAll(() => leader?.stop());

function unary<T>(start: (cb: (e: ServiceError | null, r?: T) => void) => unknown): Promise<T> {
  return new Promise((resolve, reject) => start((e, r) => (e ? reject(e) : resolve(r as T))));
}

it("refuses a deleted node's certificate on every call, and streams the CRL to nodes", async () => {
  const doomed = await leader.addNode();
  const asDoomed = await leader.client(curator.CuratorClient, { node: doomed });
  const asFirst = await leader.client(curator.CuratorClient, "node");
  const owner = await leader.client(api.ManagementClient, "owner");
  await unary((cb) => asDoomed.getConsensusStatus({}, cb));

  // A node follows the CRL: the current one first.
  const crls: Buffer[] = [];
  const stream = asFirst.watchRevocations({});
  stream.on("data", (m: curator.WatchRevocationsResponse) => crls.push(m.crl));
  stream.on("error", () => undefined);
  try {
    await eventually(() => crls.length === 1, "the current CRL");
    const serial = parseCertificate(doomed.certificate).serial;
    expect(parseCrl(crls[0]).isRevoked(serial)).toBe(false);

    await unary((cb) =>
      owner.deleteNode(
        { node: { $case: "id", id: doomed.nodeId }, bypassHasRoles: false, bypassNodeUp: true },
        cb,
      ),
    );
    // Revoked: refused as a credential, not merely as a missing record.
    await expect(unary((cb) => asDoomed.getConsensusStatus({}, cb))).rejects.toEqual(
      expect.objectContaining({
        code: status.UNAUTHENTICATED,
        details: expect.stringMatching(/revoked/),
      }),
    );
    await eventually(() => crls.length === 2, "the new CRL streamed");
    const newest = parseCrl(crls[1]);
    expect(newest.isRevoked(serial)).toBe(true);
    expect(await newest.isIssuedBy(leader.caCertificate)).toBe(true);
    // What etcd keeps is what was streamed.
    const stored = await leader.ctx.kv.get(leader.ctx.clusterCa.keys.crl).buffer();
    expect(stored?.equals(crls[1])).toBe(true);
  } finally {
    stream.cancel();
  }
});

describe("Revocations", () => {
  it("takes only newer CRLs of its own CA", async () => {
    const crl = await leader.ctx.clusterCa.crl(etcdCertificateKv(leader.ctx.kv));
    const revocations = new Revocations(leader.caCertificate);
    expect(await revocations.offer(crl.der)).toBe(true);
    // The same again, or an older one, changes nothing: a stale answer cannot un-revoke.
    expect(await revocations.offer(crl.der)).toBe(false);
    // Another CA's CRL is refused outright.
    const foreign = await CertificateAuthority.create();
    await expect(revocations.offer((await foreign.createCrl()).der)).rejects.toThrow(
      /not signed by the cluster CA/,
    );
    expect(revocations.current?.der.equals(crl.der)).toBe(true);
  });
});
