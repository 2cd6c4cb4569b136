/**
 * `takeownership`: turns the owner key into an owner certificate.
 *
 * The operator has no CA yet, only the key whose public half the first node
 * was bootstrapped with. So the cluster CA is learned trust-on-first-use:
 * asked (CuratorLocal.GetCACertificate) from the endpoint the operator
 * named, over TLS that does not verify the server — there is nothing to
 * verify it against. Its SHA-256 is shown, and `--ca-sha256` pins it instead.
 * From then on everything verifies: Escrow runs over TLS checked against
 * that CA (so the server must hold a node certificate of it), presenting the
 * owner key's self-signed certificate, and the CA Escrow returns must be the
 * same one. The owner certificate and the CA are stored in the config dir;
 * every later command authenticates both ways with them.
 */
import { credentials, Metadata } from "@grpc/grpc-js";
import { ownerCommonName } from "@metropolis/curator";
import {
  createEphemeralCertificate,
  parseCertificate,
  tlsMaterial,
  verifyCertificate,
  type ParsedCertificate,
} from "@metropolis/pki";
import { curator as curatorProto } from "@metropolis/proto";
import { abortableSleep } from "@metropolis/supervisor";
import { certificateFingerprint } from "./certificate-fingerprint";
import { ClusterSession } from "./cluster-session";
import type { CommandContext } from "./command-context";
import { configFiles } from "./config-dir";
import { formatEndpoint } from "./endpoints";
import { ConfigFileError, TrustError, UsageError } from "./errors";
import { writeLine } from "./io";
import { withProgress } from "./spinner";

/** Asks `address` for the cluster CA without verifying who answers (the TOFU step). */
async function askCa(address: string, timeoutMs: number): Promise<ParsedCertificate> {
  // rejectUnauthorized: false is the whole point here, and confined to this one call.
  const insecure = credentials.createSsl(null, null, null, { rejectUnauthorized: false });
  // A channel of its own each time: from grpc-js's shared pool, a connection refused
  // before would be refused again, without dialling, for its whole reconnect backoff.
  const local = new curatorProto.CuratorLocalClient(address, insecure, {
    "grpc.use_local_subchannel_pool": 1,
  });
  try {
    const res = await new Promise<curatorProto.GetCACertificateResponse>((resolve, reject) =>
      local.getCaCertificate({}, new Metadata(), { deadline: Date.now() + timeoutMs }, (err, r) =>
        err ? reject(err) : resolve(r),
      ),
    );
    const ca = parseCertificate(res.caCertificate);
    if (!ca.isCA) throw new TrustError(`${address} answered with a certificate that is not a CA`);
    await verifyCertificate(ca, ca);
    return ca;
  } finally {
    local.close();
  }
}

/** The longest one round of asking every endpoint waits for one of them. */
const askTimeoutMs = 5000;

/**
 * The CA from the first endpoint that answers, asking every endpoint again
 * (after a pause doubling from 250 ms to 2 s) until the dial timeout: the
 * node may not listen yet (it was just started, as the guide has it), and
 * ECONNREFUSED then is a moment, not an answer. A wrong answer (TrustError)
 * ends it at once.
 */
async function learnCa(ctx: CommandContext): Promise<{ ca: ParsedCertificate; from: string }> {
  const deadline = performance.now() + ctx.dialTimeoutMs;
  let pauseMs = 250;
  for (;;) {
    let lastError: unknown;
    for (const endpoint of await ctx.endpoints()) {
      const address = formatEndpoint(endpoint);
      const remaining = deadline - performance.now();
      try {
        return {
          ca: await askCa(address, Math.max(1, Math.min(remaining, askTimeoutMs))),
          from: address,
        };
      } catch (e) {
        if (e instanceof TrustError) throw e;
        lastError = e;
      }
    }
    const remaining = deadline - performance.now();
    if (remaining <= 0) throw lastError;
    await abortableSleep(Math.min(pauseMs, remaining), ctx.signal);
    pauseMs = Math.min(pauseMs * 2, 2000);
  }
}

const fingerprintPattern = /^[0-9a-f]{64}$/;

/** `takeownership [--ca-sha256 HEX]` */
export async function takeOwnership(
  ctx: CommandContext,
  opts: { caSha256?: string },
): Promise<void> {
  // Accepted as `openssl x509 -fingerprint -sha256` prints it too: upper case, colons, a prefix.
  const pinned = opts.caSha256
    ?.toLowerCase()
    .replace(/^sha256:/, "")
    .replace(/:/g, "");
  if (opts.caSha256 !== undefined && !fingerprintPattern.test(pinned ?? "")) {
    throw new UsageError(`--ca-sha256: "${opts.caSha256}" is not 64 hex digits`);
  }
  const key = await ctx.configDir.readOwnerKey();
  if (!key) {
    throw new ConfigFileError(
      ctx.configDir.path(configFiles.ownerKey),
      "no owner key: run `metroctl bootstrap-params` first (it creates the key the cluster is bootstrapped with)",
    );
  }

  const { ca, from } = await withProgress(ctx.io.stderr, "asking the cluster for its CA", () =>
    learnCa(ctx),
  );
  const fingerprint = certificateFingerprint(ca);
  if (pinned !== undefined && pinned !== fingerprint) {
    throw new TrustError(
      `${from} presented CA sha256:${fingerprint}, not the pinned sha256:${pinned}`,
    );
  }
  writeLine(
    ctx.io.stderr,
    pinned !== undefined
      ? `cluster CA sha256:${fingerprint} matches --ca-sha256`
      : `trusting cluster CA sha256:${fingerprint} as presented by ${from} (trust on first use)`,
  );

  // The self-signed certificate of the owner key: TLS proves the key, Escrow checks it is the owner's.
  const ephemeral = await createEphemeralCertificate(key.privateKey);
  const identity = tlsMaterial({
    certificate: ephemeral,
    privateKey: key.privateKey,
    ca: ephemeral,
  });
  const session = await ClusterSession.connect(ctx, {
    ca: ca.toPem(),
    identity: { cert: identity.cert, key: identity.key },
  });
  let escrowed;
  try {
    escrowed = await withProgress(ctx.io.stderr, "escrowing the owner certificate", () =>
      session.escrow(key.publicKey),
    );
  } finally {
    session.close();
  }

  const returnedCa = parseCertificate(escrowed.caCertificate);
  if (!returnedCa.der.equals(ca.der)) {
    throw new TrustError("the leader's Escrow answer names another CA than the one learned");
  }
  const certificate = parseCertificate(escrowed.userCertificate);
  await verifyCertificate(certificate, ca);
  if (certificate.commonName !== ownerCommonName || !certificate.publicKey.equals(key.publicKey)) {
    throw new TrustError("the escrowed certificate is not an owner certificate for the owner key");
  }
  await ctx.configDir.writeOwnerCertificate(certificate.der, ca.der);
  writeLine(
    ctx.io.stdout,
    `owner certificate stored in ${ctx.configDir.path(configFiles.ownerCertificate)}`,
  );
}
