/**
 * `access issue`, `access list`, `access revoke`: the owner's scoped
 * credentials (the curator's Access service; what each role may call is the
 * curator's access-roles.ts).
 *
 * `access issue --role reader --name alice --ttl 24h -o DIR` generates an
 * Ed25519 key here, sends only its public key to the curator leader, which
 * signs a certificate bearing the role (its subject's OU) valid for the TTL,
 * and writes DIR as a metroctl config dir of its own (the same files as the
 * owner's: the key as owner-key.pem, mode 0600; the certificate as owner.pem;
 * the cluster CA; the owner's endpoints), so that `metroctl --config DIR …`
 * works for that person, within the role, until the credential expires or
 * is revoked. DIR must not hold a key yet: an existing one is never
 * replaced. The private key never leaves this machine.
 */
import { access } from "@metropolis/proto";
import { generateKeyPair } from "@metropolis/pki";
import { isAccessName, maxAccessNameLength, maxAccessTtlSeconds } from "@metropolis/curator";
import { withOwnerSession } from "./cluster-session";
import type { CommandContext } from "./command-context";
import { ConfigDir, configFiles } from "./config-dir";
import { ConfigFileError, UsageError } from "./errors";
import { writeLine } from "./io";
import { renderTable, writeJson, type OutputFormat } from "./output";

/** The roles `access issue --role` takes. */
export const issuableRoles = ["reader", "operator", "backup"] as const;

/** Options of `access issue`. */
export interface AccessIssueOptions {
  role: string;
  name: string;
  ttl: string;
  output: string;
}

const wireRoles: Record<(typeof issuableRoles)[number], access.AccessRole> = {
  reader: access.AccessRole.READER,
  operator: access.AccessRole.OPERATOR,
  backup: access.AccessRole.BACKUP,
};

const roleNames: Partial<Record<access.AccessRole, string>> = {
  [access.AccessRole.READER]: "reader",
  [access.AccessRole.OPERATOR]: "operator",
  [access.AccessRole.BACKUP]: "backup",
};

const units: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400 };

/** A TTL such as `30s`, `15m`, `24h`, `7d` (or a bare number of seconds), in seconds. */
export function parseTtl(text: string): number {
  const match = /^(\d{1,9})([smhd]?)$/.exec(text);
  const seconds = match ? Number(match[1]) * (units[match[2] || "s"] ?? 1) : Number.NaN;
  if (!(seconds >= 1 && seconds <= maxAccessTtlSeconds)) {
    throw new UsageError(
      `--ttl: "${text.slice(0, 40)}" is not a duration from 1s to 366d (e.g. 30s, 15m, 24h, 7d)`,
    );
  }
  return seconds;
}

function parseRole(text: string): access.AccessRole {
  for (const role of issuableRoles) if (role === text) return wireRoles[role];
  throw new UsageError(
    `--role: "${text.slice(0, 40)}" is not one of ${issuableRoles.join(", ")} (the owner's own access is its config dir)`,
  );
}

function checkName(name: string): string {
  if (!isAccessName(name)) {
    throw new UsageError(
      `--name: "${name.slice(0, 60)}" must be 1–${maxAccessNameLength} of a-z 0-9 . _ -, starting and ending with a letter or digit, not "owner" nor a node ID`,
    );
  }
  return name;
}

/** One credential as `access list` shows it. */
export interface AccessView {
  name: string;
  role: string;
  serial: string;
  issuedAt: string | null;
  expiresAt: string | null;
  /** active, expired or revoked (at the time of listing). */
  status: "active" | "expired" | "revoked";
}

/** The view of `credential` at `now`. */
export function accessView(credential: access.AccessCredential, now = Date.now()): AccessView {
  const expiresAt = credential.notAfter ?? null;
  return {
    name: credential.name,
    role: roleNames[credential.role] ?? `unknown (${credential.role})`,
    serial: credential.serial,
    issuedAt: credential.issuedAt?.toISOString() ?? null,
    expiresAt: expiresAt?.toISOString() ?? null,
    status: credential.revokedAt
      ? "revoked"
      : expiresAt && expiresAt.getTime() < now
        ? "expired"
        : "active",
  };
}

/** `access issue`: see the module comment. */
export async function accessIssue(ctx: CommandContext, opts: AccessIssueOptions): Promise<void> {
  const role = parseRole(opts.role);
  const name = checkName(opts.name);
  const ttlSeconds = parseTtl(opts.ttl);
  const target = new ConfigDir(opts.output);
  if ((await target.readOwnerKey()) !== undefined) {
    throw new ConfigFileError(
      target.path(configFiles.ownerKey),
      "exists already: issue into a new directory (an existing key is never replaced)",
    );
  }
  const endpoints = await ctx.endpoints();
  const key = generateKeyPair();
  const issued = await withOwnerSession(ctx, (session) =>
    session.access<access.IssueAccessResponse>((client, m, o, cb) =>
      client.issueAccess({ name, role, publicKey: key.publicKey, ttlSeconds }, m, o, cb),
    ),
  );
  // The key first: a certificate without its key would be useless.
  await target.writeOwnerKey(key.privateKey);
  await target.writeOwnerCertificate(issued.certificate, issued.caCertificate);
  await target.writeEndpoints(endpoints);
  const view = issued.credential ? accessView(issued.credential) : undefined;
  writeLine(
    ctx.io.stdout,
    `issued the ${opts.role} credential "${name}" (serial ${view?.serial ?? "?"}, expires ${view?.expiresAt ?? "?"}) into ${opts.output}: use it with metroctl --config ${opts.output}`,
  );
}

/** `access list`: every credential issued, with its status now. */
export async function accessList(
  ctx: CommandContext,
  opts: { output: OutputFormat },
): Promise<void> {
  const listed = await withOwnerSession(ctx, (session) =>
    session.access<access.ListAccessResponse>((client, m, o, cb) =>
      client.listAccess({}, m, o, cb),
    ),
  );
  const views = listed.credentials.map((c) => accessView(c));
  if (opts.output === "json") return writeJson(ctx.io.stdout, views);
  writeLine(
    ctx.io.stdout,
    renderTable<AccessView>(
      [
        { heading: "NAME", cell: (v) => v.name },
        { heading: "ROLE", cell: (v) => v.role },
        { heading: "SERIAL", cell: (v) => v.serial },
        { heading: "EXPIRES", cell: (v) => v.expiresAt ?? "-" },
        { heading: "STATUS", cell: (v) => v.status },
      ],
      views,
    ),
  );
}

/** `access revoke NAME|SERIAL`: a lower-case hex of at least 16 digits is a serial, anything else a name. */
export async function accessRevoke(ctx: CommandContext, target: string): Promise<void> {
  const bySerial = /^[0-9a-f]{16,32}$/.test(target);
  const request: access.RevokeAccessRequest = bySerial
    ? { target: { $case: "serial", serial: target } }
    : { target: { $case: "name", name: checkName(target) } };
  const answer = await withOwnerSession(ctx, (session) =>
    session.access<access.RevokeAccessResponse>((client, m, o, cb) =>
      client.revokeAccess(request, m, o, cb),
    ),
  );
  if (answer.revoked.length === 0) {
    writeLine(ctx.io.stdout, `nothing to revoke: ${target} was revoked already`);
    return;
  }
  for (const credential of answer.revoked) {
    writeLine(
      ctx.io.stdout,
      `revoked the ${roleNames[credential.role] ?? "?"} credential "${credential.name}" (serial ${credential.serial})`,
    );
  }
}
