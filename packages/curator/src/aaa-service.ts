/**
 * The AAA service: how the cluster's owner gets an owner certificate.
 *
 * The owner dials with a self-signed certificate for the owner key, so the
 * TLS handshake proves possession of that key; Escrow then checks that the
 * key is the cluster's initial owner key (set at bootstrap) and issues a
 * client-only certificate for CN=owner from the cluster CA.
 *
 * The certificate is kept in the cluster PKI store under the name `owner`:
 * issuing is then idempotent (every Escrow returns the same certificate, on
 * every leader), and the cluster knows which owner certificate exists.
 */
import { timingSafeEqual } from "node:crypto";
import { status } from "@grpc/grpc-js";
import { etcdCertificateKv } from "@metropolis/consensus";
import {
  ConcurrentIssuanceError,
  userTemplate,
  type CertificateKv,
  type IssuedCertificate,
} from "@metropolis/pki";
import { api, priv } from "@metropolis/proto";
import {
  CuratorError,
  FailedPreconditionError,
  LostLeadershipError,
  PermissionDeniedError,
  UnauthenticatedError,
} from "./errors";
import { unary } from "./grpc-handlers";
import { ownerCommonName, presentedCertificate, type Caller } from "./identity";
import { initialOwnerKey } from "./keys";
import type { LeaderContext } from "./leader-context";
import type { Leadership } from "./leadership";
import { checkPublicKey } from "./management-nodes";

/** Name of the owner certificate in the cluster PKI store. */
export const ownerCertificateName = "owner";

/**
 * The leader's etcd namespace as the PKI store's kv, with every transaction
 * guarded by leadership: the etcd adapter starts each through `if(…)`, so a
 * deposed leader's issuance fails instead of committing.
 */
export function leaderGuardedKv(leadership: Leadership): CertificateKv {
  const kv = leadership.kv;
  return etcdCertificateKv({
    get: kv.get.bind(kv),
    put: kv.put.bind(kv),
    if: (key, column, cmp, value) => leadership.txn().and(key, column, cmp, value),
  });
}

/** The initial owner's public key; FAILED_PRECONDITION when the cluster has none. */
export async function initialOwner(ctx: LeaderContext): Promise<Buffer> {
  const value = await ctx.kv.get(initialOwnerKey).buffer();
  if (value === null) throw new FailedPreconditionError("this cluster has no initial owner");
  return priv.InitialOwner.decode(value).publicKey;
}

/**
 * Issues (or loads) the owner certificate for `publicKey`. A concurrent
 * issuance by another call makes our guarded write fail: then either
 * leadership was lost, or the other call won and a retry loads its
 * certificate.
 */
async function ownerCertificate(ctx: LeaderContext, publicKey: Buffer): Promise<IssuedCertificate> {
  const certificate = ctx.clusterCa.store.certificate(ownerCertificateName, {
    issuer: ctx.clusterCa,
    template: userTemplate(ownerCommonName),
    key: { publicKey },
  });
  const kv = leaderGuardedKv(ctx.leadership);
  for (let attempt = 0; ; attempt++) {
    try {
      return await certificate.ensure(kv);
    } catch (e) {
      if (!(e instanceof ConcurrentIssuanceError)) throw e;
      if (!(await ctx.leadership.stillLeads())) throw new LostLeadershipError();
      if (attempt >= 2)
        throw new CuratorError(
          status.ABORTED,
          "owner certificate issuance kept conflicting; retry",
        );
    }
  }
}

/** Implements Escrow for `caller`. */
async function escrow(
  ctx: LeaderContext,
  caller: Caller,
  req: api.EscrowRequest,
): Promise<api.EscrowResponse> {
  if (caller.kind === "anonymous") {
    throw new UnauthenticatedError(
      "Escrow needs a self-signed client certificate for the owner key",
    );
  }
  if (caller.kind !== "ephemeral") {
    throw new PermissionDeniedError(
      `Escrow needs a self-signed certificate for the owner key, not ${presentedCertificate(caller.kind)}`,
    );
  }
  const requested = checkPublicKey(req.publicKey, "public_key");
  if (!requested.equals(caller.publicKey)) {
    throw new PermissionDeniedError("public_key is not the key of the client certificate");
  }
  const owner = await initialOwner(ctx);
  // The key is public, but comparing in constant time costs nothing and leaves nothing to reason about.
  if (owner.length !== requested.length || !timingSafeEqual(owner, requested)) {
    throw new PermissionDeniedError("this key is not the cluster owner's");
  }
  const issued = await ownerCertificate(ctx, requested);
  ctx.logger.info(
    issued.created ? "issued the owner certificate" : "handed out the owner certificate again",
  );
  return { userCertificate: issued.certificate.der, caCertificate: issued.ca.der };
}

/** The AAA service of the leader whose context is `ctx`. */
export function aaaServer(ctx: LeaderContext): api.AAAServer {
  return {
    escrow: unary("AAA.Escrow", ctx.logger, async (call) =>
      escrow(ctx, await ctx.identify(call), call.request),
    ),
  };
}
