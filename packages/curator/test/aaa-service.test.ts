/**
 * The AAA service against a real leader (startLeader of @metropolis/curator/testing): the owner
 * escrows a certificate with a self-signed certificate for the owner key,
 * and that certificate then works for Management.
 */
import { status } from "@grpc/grpc-js";
import { parseCertificate, tlsMaterial, verifyCertificate } from "@metropolis/pki";
import { api } from "@metropolis/proto";
import { aaaServer } from "../src/aaa-service";
import { managementServer, managementService } from "../src/management-service";
import {
  newKeyPair,
  startLeader,
  type ClientIdentity,
  type LeaderFixture,
} from "@metropolis/curator/testing";
import { expectCode } from "./expect-code";

let leader: LeaderFixture;

beforeAll(async () => {
  leader = await startLeader({
    services: (ctx) => {
      return [
        [api.AAAService, aaaServer(ctx)],
        [managementService, managementServer(ctx)],
      ];
    },
  });
}, 30_000);

afterAll(async () => {
  await leader?.stop();
});

async function escrow(
  identity: ClientIdentity,
  publicKey: Uint8Array,
): Promise<api.EscrowResponse> {
  const client = await leader.client(api.AAAClient, identity);
  return new Promise((resolve, reject) =>
    client.escrow({ publicKey: Buffer.from(publicKey) }, (err, res) =>
      err ? reject(err) : resolve(res),
    ),
  );
}

describe("Escrow", () => {
  it("gives the initial owner a client-only CN=owner certificate from the cluster CA, the same each time", async () => {
    const res = await escrow({ ephemeral: leader.owner.privateKey }, leader.owner.publicKey);
    expect(res.caCertificate.equals(leader.caCertificate)).toBe(true);
    const certificate = parseCertificate(res.userCertificate);
    await verifyCertificate(certificate, leader.caCertificate);
    expect(certificate.commonName).toBe("owner");
    expect(certificate.extendedKeyUsage).toEqual(["clientAuth"]);
    expect(certificate.isCA).toBe(false);
    expect(certificate.publicKey.equals(leader.owner.publicKey)).toBe(true);

    const again = await Promise.all(
      Array.from({ length: 3 }, () =>
        escrow({ ephemeral: leader.owner.privateKey }, leader.owner.publicKey),
      ),
    );
    for (const r of again) expect(r.userCertificate.equals(res.userCertificate)).toBe(true);
  });

  it("issues a certificate that Management accepts as the owner's", async () => {
    const res = await escrow({ ephemeral: leader.owner.privateKey }, leader.owner.publicKey);
    const tls = tlsMaterial({
      certificate: res.userCertificate,
      privateKey: leader.owner.privateKey,
      ca: res.caCertificate,
    });
    const management = await leader.client(api.ManagementClient, { tls });
    const ticket = await new Promise<api.GetRegisterTicketResponse>((resolve, reject) =>
      management.getRegisterTicket({}, (err, r) => (err ? reject(err) : resolve(r))),
    );
    expect(ticket.ticket).toHaveLength(32);
  });

  it("refuses any other key", async () => {
    const stranger = newKeyPair();
    await expectCode(
      escrow({ ephemeral: stranger.privateKey }, stranger.publicKey),
      status.PERMISSION_DENIED,
      /owner/,
    );
  });

  it("refuses a public_key that is not the TLS certificate's", async () => {
    const stranger = newKeyPair();
    // Claiming the owner key without holding it.
    await expectCode(
      escrow({ ephemeral: stranger.privateKey }, leader.owner.publicKey),
      status.PERMISSION_DENIED,
      /client certificate/,
    );
    await expectCode(
      escrow({ ephemeral: leader.owner.privateKey }, Buffer.alloc(16)),
      status.INVALID_ARGUMENT,
    );
  });

  it("needs a self-signed certificate", async () => {
    await expectCode(escrow("none", leader.owner.publicKey), status.UNAUTHENTICATED);
    await expectCode(escrow("node", leader.firstNode.publicKey), status.PERMISSION_DENIED);
    await expectCode(escrow("owner", leader.owner.publicKey), status.PERMISSION_DENIED);
  });
});
