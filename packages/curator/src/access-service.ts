/**
 * The Access service: the owner issues, lists and revokes scoped credentials
 * (access-roles.ts). Served by the curator leader; every call is the owner's
 * alone (the table has no role for it), checked first.
 *
 * - IssueAccess signs, with the cluster CA, a certificate for a public key
 *   the owner's machine generated: the private key never reaches the
 *   cluster. The certificate bears the role in the access role extension,
 *   CN = the person's name, TLS client only, notAfter = now + the TTL. The
 *   record of it (access.AccessCredential) is written to etcd at
 *   `/access/credentials/<serial hex>`, in a leadership-guarded transaction.
 * - ListAccess reads every record back, oldest first.
 * - RevokeAccess revokes by name (every credential of it) or serial: each
 *   serial goes on the cluster CA's CRL (the CRL nodes follow, as for a
 *   deleted node's certificate), then the record gets its revokedAt. The
 *   leader applies the new CRL at once; nodes within a watch.
 */
import { status, type sendUnaryData, type ServerUnaryCall } from "@grpc/grpc-js";
import { access } from "@metropolis/proto";
import { accessTemplate, ConcurrentRevocationError, type RevocationList } from "@metropolis/pki";
import { leaderGuardedKv } from "./aaa-service";
import { isAccessName, maxAccessNameLength, requireAccess, type AccessRole } from "./access-roles";
import { quoted } from "./bounded-text";
import { CuratorError, InvalidArgumentError, LostLeadershipError, NotFoundError } from "./errors";
import { unary } from "./grpc-handlers";
import type { LeaderContext } from "./leader-context";
import { checkPublicKey } from "./management-nodes";

/** Where the records of issued credentials are, in the curator namespace. */
export const accessCredentialsPrefix = "/access/credentials/";

/** The record of the credential with serial `serialHex`. */
export function accessCredentialKey(serialHex: string): string {
  return `${accessCredentialsPrefix}${serialHex}`;
}

/** Longest TTL of a credential: 366 days. */
export const maxAccessTtlSeconds = 366 * 24 * 3600;

/** Most credentials kept on record: beyond it, IssueAccess refuses until some are revoked and pruned. */
export const maxAccessCredentials = 10_000;

const roleNames: Record<AccessRole, access.AccessRole> = {
  reader: access.AccessRole.READER,
  operator: access.AccessRole.OPERATOR,
  backup: access.AccessRole.BACKUP,
};

/** The role `wire` names; INVALID_ARGUMENT for UNSPECIFIED or an unknown value. */
export function accessRoleOf(wire: access.AccessRole): AccessRole {
  switch (wire) {
    case access.AccessRole.READER:
      return "reader";
    case access.AccessRole.OPERATOR:
      return "operator";
    case access.AccessRole.BACKUP:
      return "backup";
    default:
      throw new InvalidArgumentError(`role must be reader, operator or backup, not ${wire}`);
  }
}

/** The wire value of `role`. */
export function accessRoleWire(role: AccessRole): access.AccessRole {
  return roleNames[role];
}

/** Every record of an issued credential, oldest first. */
export async function listAccessCredentials(
  ctx: LeaderContext,
): Promise<access.AccessCredential[]> {
  const all = await ctx.kv.getAll().prefix(accessCredentialsPrefix).buffers();
  return Object.values(all)
    .map((value) => access.AccessCredential.decode(value))
    .sort((a, b) => (a.issuedAt?.getTime() ?? 0) - (b.issuedAt?.getTime() ?? 0));
}

async function issueAccess(
  ctx: LeaderContext,
  req: access.IssueAccessRequest,
): Promise<access.IssueAccessResponse> {
  if (!isAccessName(req.name)) {
    throw new InvalidArgumentError(
      `name ${quoted(req.name)} must be 1–${maxAccessNameLength} of [a-z0-9._-], starting and ending with a letter or digit, not "owner" nor a node ID`,
    );
  }
  const role = accessRoleOf(req.role);
  const publicKey = checkPublicKey(req.publicKey, "public_key");
  if (!(req.ttlSeconds >= 1 && req.ttlSeconds <= maxAccessTtlSeconds)) {
    throw new InvalidArgumentError(
      `ttl_seconds must be from 1 to ${maxAccessTtlSeconds} (366 days), not ${req.ttlSeconds}`,
    );
  }
  const count = await ctx.kv.getAll().prefix(accessCredentialsPrefix).count();
  if (count >= maxAccessCredentials) {
    throw new CuratorError(
      status.RESOURCE_EXHAUSTED,
      `${count} credentials are on record, the most kept; revoke some first`,
    );
  }
  const authority = await ctx.clusterCa.authority(leaderGuardedKv(ctx.leadership));
  const issuedAt = new Date();
  const certificate = await authority.issue(accessTemplate(req.name, role), publicKey, {
    notAfter: new Date(issuedAt.getTime() + req.ttlSeconds * 1000),
  });
  const credential: access.AccessCredential = {
    name: req.name,
    role: roleNames[role],
    serial: certificate.serial.toString(16),
    publicKey,
    issuedAt,
    notAfter: certificate.notAfter,
    revokedAt: undefined,
  };
  const key = accessCredentialKey(credential.serial);
  const txn = ctx.leadership
    .txn()
    .and(key, "Create", "==", 0)
    .then(ctx.kv.put(key).value(Buffer.from(access.AccessCredential.encode(credential).finish())));
  if (!(await ctx.leadership.commit(txn))) {
    if (!(await ctx.leadership.stillLeads())) throw new LostLeadershipError();
    throw new CuratorError(status.ABORTED, "a credential with the same serial exists; retry");
  }
  ctx.logger.info(
    `issued the ${role} credential ${quoted(req.name)} (serial ${credential.serial}, until ${certificate.notAfter.toISOString()})`,
  );
  return { certificate: certificate.der, caCertificate: authority.certificate.der, credential };
}

async function revokeAccess(
  ctx: LeaderContext,
  req: access.RevokeAccessRequest,
): Promise<access.RevokeAccessResponse> {
  const target = req.target;
  if (target === undefined) throw new InvalidArgumentError("name or serial must be given");
  if (target.$case === "serial" && !/^[0-9a-f]{1,32}$/.test(target.serial)) {
    throw new InvalidArgumentError(
      `serial ${quoted(target.serial)} is not a certificate serial (lower-case hex)`,
    );
  }
  if (target.$case === "name" && !isAccessName(target.name)) {
    throw new InvalidArgumentError(`name ${quoted(target.name)} is not a credential's name`);
  }
  const matching = (await listAccessCredentials(ctx)).filter((c) =>
    target.$case === "serial" ? c.serial === target.serial : c.name === target.name,
  );
  if (matching.length === 0) {
    throw new NotFoundError(
      `no credential was issued ${target.$case === "serial" ? `with serial ${target.serial}` : `to ${quoted(target.name)}`}`,
    );
  }
  const revoked: access.AccessCredential[] = [];
  let crl: RevocationList | undefined;
  for (const credential of matching.filter((c) => c.revokedAt === undefined)) {
    try {
      crl = await ctx.clusterCa.revoke(
        leaderGuardedKv(ctx.leadership),
        BigInt(`0x${credential.serial}`),
      );
    } catch (e) {
      if (e instanceof ConcurrentRevocationError && !(await ctx.leadership.stillLeads())) {
        throw new LostLeadershipError();
      }
      throw e;
    }
    const record = { ...credential, revokedAt: new Date() };
    const key = accessCredentialKey(credential.serial);
    await ctx.leadership.commit(
      ctx.leadership
        .txn()
        .then(ctx.kv.put(key).value(Buffer.from(access.AccessCredential.encode(record).finish()))),
    );
    revoked.push(record);
    ctx.logger.info(
      `revoked the credential ${quoted(credential.name)} (serial ${credential.serial})`,
    );
  }
  // Applied here at once: the next call of a revoked credential is refused.
  if (crl) await ctx.revocations.offer(crl.der);
  return { revoked };
}

/** An Access handler: the caller's access first (the owner's alone), then `handler`. */
function authorized<Req, Res>(
  ctx: LeaderContext,
  method: string,
  handler: (req: Req) => Promise<Res>,
): (call: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>) => void {
  return unary<Req, Res>(`Access.${method}`, ctx.logger, async (call) => {
    requireAccess(await ctx.identify(call), `Access.${method}`);
    return handler(call.request);
  });
}

/** The Access service of the leader whose context is `ctx`. */
export function accessServer(ctx: LeaderContext): access.AccessServer {
  return {
    issueAccess: authorized(ctx, "IssueAccess", (req: access.IssueAccessRequest) =>
      issueAccess(ctx, req),
    ),
    listAccess: authorized(ctx, "ListAccess", async () => ({
      credentials: await listAccessCredentials(ctx),
    })),
    revokeAccess: authorized(ctx, "RevokeAccess", (req: access.RevokeAccessRequest) =>
      revokeAccess(ctx, req),
    ),
  };
}
