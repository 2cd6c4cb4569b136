/**
 * Who is calling: the curator's listener requests a client certificate but
 * leaves its verification to each call (a registering node presents a
 * self-signed certificate no CA vouches for), and this module classifies it.
 *
 * | certificate                                     | caller      | may call                          |
 * | ----------------------------------------------- | ----------- | --------------------------------- |
 * | issued by the cluster CA, CN = node ID, server  | `node`      | Curator (its own node only)       |
 * | issued by the cluster CA, CN = owner, client    | `owner`     | Management                        |
 * | issued by the cluster CA, CN = name, client,    | `scoped`    | what access-roles.ts grants its   |
 * |   bearing an access role, within its validity   |             | role                              |
 * | self-signed, CN = node ID of its own key        | `ephemeral` | RegisterNode, CommitNode, JoinNode |
 * | none                                            | `anonymous` | CuratorLocal, AAA (own checks)    |
 *
 * A certificate of the cluster CA that the CA's revocation list names (its
 * node was deleted, its credential revoked) is refused as UNAUTHENTICATED,
 * like a foreign one, and so is one past its notAfter (a scoped credential's
 * expiry), on every call: a connection made before it expired does not keep it.
 * A certificate bearing an access role is never a node's nor the owner's.
 */
import { createHash } from "node:crypto";
import type { X509Certificate } from "node:crypto";
import { TLSSocket } from "node:tls";
import type { ServerUnaryCall } from "@grpc/grpc-js";
import {
  isNodeId,
  nodeIdFromPublicKey,
  parseCertificate,
  readAccessRole,
  verifyCertificate,
  type ParsedCertificate,
} from "@metropolis/pki";
import { isAccessName, isAccessRole, type AccessRole } from "./access-roles";
import { clipped, quoted } from "./bounded-text";
import { PermissionDeniedError, UnauthenticatedError } from "./errors";
import type { Revocations } from "./revocations";

export type Caller =
  | { kind: "node"; nodeId: string; publicKey: Buffer }
  | { kind: "owner"; publicKey: Buffer }
  /** A scoped credential the owner issued (`metroctl access issue`): its role and name as the CA signed them. */
  | { kind: "scoped"; role: AccessRole; name: string; publicKey: Buffer }
  | { kind: "ephemeral"; publicKey: Buffer }
  | { kind: "anonymous" };

/** Anything with the peer's TLS data: every grpc-js server call. */
export type HasAuthContext = Pick<ServerUnaryCall<unknown, unknown>, "getAuthContext">;

/** The CN of owner certificates. */
export const ownerCommonName = "owner";

type Internal = {
  call?: Internal;
  nextCall?: Internal;
  stream?: { session?: Session };
};

/** An HTTP/2 session of the server: one client connection. */
type Session = { socket?: unknown };

/**
 * The HTTP/2 session (the connection) `call` came on. It sits in grpc-js
 * internals (the call's http2 stream): `@grpc/grpc-js` is pinned to a minor
 * version, and the tests of ephemeral callers fail loudly if the internals
 * move. Undefined for a call that is not grpc-js's (the metrics endpoint's).
 */
function sessionOf(call: HasAuthContext): Session | undefined {
  let inner = (call as Internal).call;
  while (inner && !inner.stream && inner.nextCall) inner = inner.nextCall;
  return inner?.stream?.session;
}

/**
 * A client certificate as found: Node's parse of it (from a TLS socket),
 * or its DER (from a call's auth context).
 */
type PeerCertificate = X509Certificate | Buffer;

/**
 * The client certificate of a connection, read from its TLS socket as Node
 * parsed it (and taken as it is, not parsed again: a new leader reads every
 * node's at once): grpc-js's `getAuthContext()` reports one only when TLS
 * itself verified it (`socket.authorized`), which a self-signed one never
 * is, and builds the whole parsed certificate (subject, issuer, three
 * fingerprints) to do so. Undefined once the client has closed the connection.
 */
function sessionCertificate(session: Session): X509Certificate | undefined {
  const socket = session.socket;
  if (!(socket instanceof TLSSocket)) return undefined;
  // Undefined once the client has closed the connection, whatever its type says.
  const certificate: X509Certificate | undefined = socket.getPeerX509Certificate();
  return certificate;
}

/** The DER of `certificate` (empty: none). */
const derOf = (certificate: PeerCertificate): Buffer =>
  Buffer.isBuffer(certificate) ? certificate : certificate.raw;

/** The DER of the client certificate of a call that is not grpc-js's, from its `getAuthContext()`. */
function authContextCertificateDer(call: HasAuthContext): Buffer | undefined {
  try {
    return call.getAuthContext().sslPeerCertificate?.raw;
  } catch {
    // grpc-js reads `getPeerCertificate().raw`, and a socket closed by its
    // client before the call is handled has no certificate (null): the caller
    // is gone, and is handled as the anonymous caller it now is.
    return undefined;
  }
}

/** The client certificate of `call`, if it has one. */
function peerCertificate(call: HasAuthContext): PeerCertificate | undefined {
  const session = sessionOf(call);
  return session ? sessionCertificate(session) : authContextCertificateDer(call);
}

function parsePeerCertificate(certificate: PeerCertificate): ParsedCertificate {
  try {
    return parseCertificate(certificate);
  } catch (e) {
    throw new UnauthenticatedError(
      `client certificate does not parse: ${clipped(e instanceof Error ? e.message : String(e))}`,
    );
  }
}

/** Classifies the caller of `call` against the cluster CA. Never trusts what it cannot verify. */
export async function identify(
  call: HasAuthContext,
  caCertificate: Uint8Array | ParsedCertificate,
): Promise<Caller> {
  const peer = peerCertificate(call);
  if (!peer || derOf(peer).length === 0) return { kind: "anonymous" };
  return classify(parsePeerCertificate(peer), parseCertificate(caCertificate));
}

/**
 * Bound on the classifications an {@link IdentityCache} remembers: above the
 * 10,000 nodes the control plane is sized for (plus owners and enrolling
 * nodes), so that a big cluster's calls do not push each other out and pay
 * a parse each. Entries are keyed by the certificate's SHA-256, about 200
 * bytes each: 13 MB when full.
 */
const identityCacheSize = 65_536;

/** Bound on the callers an {@link IdentityCache} waits to learn: a cluster's nodes, and then some. */
const maxQueuedLearning = 16_384;

/** A certificate's classification, and its serial for the revocation check of every call. */
export interface Identified {
  caller: Caller;
  serial: bigint;
  /** The certificate's notAfter, in ms since the epoch: checked on every call. */
  notAfter: number;
}

/**
 * The classifications of a curator's callers against one CA, kept for as
 * long as the curator runs: reading, parsing and verifying a node's
 * certificate cost a new leader 1–2 ms of CPU each (measured in the scale
 * simulator's failover, where 5,000 nodes come at once), and a node presents
 * the same certificate on every call (heartbeats, status) and keeps its
 * connection to every curator across changes of leader (call-router.ts).
 * Kept per curator rather than per leadership, a follower can learn its
 * callers ahead of leading ({@link learn}: the nodes that ask it who leads
 * while the leader has failed), and a new leader met every standby
 * connection as a stranger: in a profile of a 2,000-node failover, reading
 * and verifying their certificates was a quarter of the new leader's CPU
 * while the nodes came back, and its event loop stalled for seconds at
 * 5,000 nodes.
 *
 * Only successful classifications are kept; the oldest are forgotten first.
 * Revocation is not this cache's business: {@link identifier} checks it on
 * every call.
 */
export class IdentityCache {
  private readonly known = new Map<string, Identified>();
  // A connection's certificate cannot change (TLS 1.3 only: no
  // renegotiation, see credentials.ts), so its classification is kept with
  // the connection: a call on it costs a lookup, where reading the
  // certificate off the socket and hashing it was ~10 % of a leader's CPU
  // while a cluster's nodes attached to it.
  private readonly bySession = new WeakMap<Session, Identified>();
  // Parsed once, and with it the CA's key object (ParsedCertificate keeps
  // it): building that key for each verification was half the cost of a
  // new leader meeting every node's certificate at once.
  private readonly ca: ParsedCertificate;
  /** Callers to learn (see {@link learn}), oldest first, with what to tell when done. */
  private readonly toLearn: { call: HasAuthContext; done: () => void }[] = [];
  /** learnQueued is working through them. */
  private learning = false;

  constructor(caCertificate: Uint8Array) {
    this.ca = parseCertificate(caCertificate);
  }

  /** The classification of `call`'s client certificate; undefined when it has none. */
  async identified(call: HasAuthContext): Promise<Identified | undefined> {
    const session = sessionOf(call);
    let entry = session && this.bySession.get(session);
    if (entry) return entry;
    const peer = peerCertificate(call);
    const raw = peer && derOf(peer);
    if (!peer || !raw?.length) return undefined;
    const key = createHash("sha256").update(raw).digest("base64");
    entry = this.known.get(key);
    if (!entry) {
      const cert = parsePeerCertificate(peer);
      entry = {
        caller: await classify(cert, this.ca),
        serial: cert.serial,
        notAfter: cert.notAfter.getTime(),
      };
      const oldest = this.known.keys().next();
      if (this.known.size >= identityCacheSize && !oldest.done) this.known.delete(oldest.value);
      this.known.set(key, entry);
    }
    if (session) this.bySession.set(session, entry);
    return entry;
  }

  /**
   * Classifies `call`'s caller in the background, for the calls it will make
   * later (a follower's callers, when it leads); resolves once done (or
   * dropped), never rejects. A certificate that does not classify is left
   * for those calls to refuse. One caller per turn of the event loop: the
   * nodes of a cluster all ask at once when the leader fails, and
   * classifying them in one go stalled the curator's loop for seconds —
   * its campaign for the leadership among what waited. At most
   * {@link maxQueuedLearning} wait; more are not learnt ahead.
   */
  learn(call: HasAuthContext): Promise<void> {
    if (this.toLearn.length >= maxQueuedLearning) return Promise.resolve();
    return new Promise<void>((done) => {
      this.toLearn.push({ call, done });
      if (!this.learning) {
        this.learning = true;
        setImmediate(() => void this.learnQueued());
      }
    });
  }

  /** Works through the callers to learn, one per turn of the event loop, until none is left. */
  private async learnQueued(): Promise<void> {
    for (let next = this.toLearn.shift(); next; next = this.toLearn.shift()) {
      await this.identified(next.call).catch(() => undefined);
      next.done();
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    this.learning = false;
  }
}

/**
 * `identify` against one CA (or a curator's {@link IdentityCache} of it),
 * remembering the classification of each certificate. Revocation is checked
 * on every call, against the newest CRL `revocations` knows (a map lookup),
 * so a certificate revoked after it was first seen is refused from then on.
 */
export function identifier(
  ca: Uint8Array | IdentityCache,
  revocations?: Revocations,
): (call: HasAuthContext) => Promise<Caller> {
  const cache = ca instanceof IdentityCache ? ca : new IdentityCache(ca);
  return async (call) => {
    const entry = await cache.identified(call);
    if (!entry) return { kind: "anonymous" };
    // Self-signed (ephemeral) certificates are no CA's to revoke.
    if (entry.caller.kind === "ephemeral") return entry.caller;
    if (revocations?.isRevoked(entry.serial)) {
      const why =
        entry.caller.kind === "scoped"
          ? `the owner revoked the ${entry.caller.role} credential ${quoted(entry.caller.name)}`
          : "its node was deleted";
      throw new UnauthenticatedError(
        `client certificate (serial ${entry.serial.toString(16)}) was revoked by the cluster CA: ${why}`,
      );
    }
    // Classified once, checked on every call: a connection outlives no certificate.
    if (Date.now() > entry.notAfter) {
      throw new UnauthenticatedError(
        `client certificate (serial ${entry.serial.toString(16)}) expired at ${new Date(entry.notAfter).toISOString()}`,
      );
    }
    return entry.caller;
  };
}

async function classify(cert: ParsedCertificate, ca: ParsedCertificate): Promise<Caller> {
  if (cert.isSelfIssued() && cert.isSignedBy(cert.publicKey)) {
    // TLS proved the caller holds the key; the certificate claims nothing else.
    if (cert.commonName !== nodeIdFromPublicKey(cert.publicKey)) {
      throw new UnauthenticatedError(
        "self-signed client certificate must name the node ID of its own key",
      );
    }
    return { kind: "ephemeral", publicKey: cert.publicKey };
  }
  try {
    await verifyCertificate(cert, ca);
  } catch (e) {
    throw new UnauthenticatedError(
      `client certificate is not trusted by this cluster: ${clipped(e instanceof Error ? e.message : String(e))}`,
    );
  }
  const cn = cert.commonName ?? "";
  const scoped = scopedCaller(cert, cn);
  if (scoped) return scoped;
  if (
    isNodeId(cn) &&
    cn === nodeIdFromPublicKey(cert.publicKey) &&
    cert.extendedKeyUsage.includes("serverAuth")
  ) {
    return { kind: "node", nodeId: cn, publicKey: cert.publicKey };
  }
  if (cn === ownerCommonName && !cert.extendedKeyUsage.includes("serverAuth")) {
    return { kind: "owner", publicKey: cert.publicKey };
  }
  throw new UnauthenticatedError(
    `client certificate for ${quoted(cn)} is neither a node's nor the owner's`,
  );
}

/**
 * The scoped caller `cert` (verified against the CA already) is, when it
 * bears an access role; undefined when it bears none. A role on anything but
 * a client certificate of a valid person's name is refused: a node
 * certificate, or one for the owner's CN, never carries a role.
 */
function scopedCaller(cert: ParsedCertificate, cn: string): Caller | undefined {
  let role: string | undefined;
  try {
    role = readAccessRole(cert);
  } catch (e) {
    throw new UnauthenticatedError(
      `client certificate does not parse: ${clipped(e instanceof Error ? e.message : String(e))}`,
    );
  }
  if (role === undefined) return undefined;
  if (cn === ownerCommonName || isNodeId(cn)) {
    throw new UnauthenticatedError(
      `client certificate for ${quoted(cn)} bears the ${quoted(role)} role: neither a node's nor the owner's certificate ever bears one`,
    );
  }
  if (!isAccessRole(role)) {
    throw new UnauthenticatedError(
      `client certificate bears an unknown access role ${quoted(role)}`,
    );
  }
  if (cert.extendedKeyUsage.includes("serverAuth") || !isAccessName(cn)) {
    throw new UnauthenticatedError(
      `client certificate for ${quoted(cn)} bears the ${role} role but is no scoped credential (a node's, the owner's, or a bad name)`,
    );
  }
  return { kind: "scoped", role, name: cn, publicKey: cert.publicKey };
}

/** The caller, which must be a node (optionally: this node). */
export function requireNode(caller: Caller, nodeId?: string): Extract<Caller, { kind: "node" }> {
  if (caller.kind === "anonymous")
    throw new UnauthenticatedError("this call needs a node certificate");
  if (caller.kind !== "node")
    throw new PermissionDeniedError(
      `this call needs a node certificate, not ${presentedCertificate(caller.kind)}`,
    );
  if (nodeId !== undefined && caller.nodeId !== nodeId) {
    throw new PermissionDeniedError(`node ${caller.nodeId} may not act for node ${quoted(nodeId)}`);
  }
  return caller;
}

/**
 * "a node certificate", "an owner certificate", …: the kind of certificate
 * `kind` presents, with the article its first word takes, for messages that
 * say what a caller presented instead.
 */
export function presentedCertificate(kind: Exclude<Caller["kind"], "anonymous">): string {
  const article = /^[aeiou]/.test(kind) ? "an" : "a";
  return `${article} ${kind} certificate`;
}

/** The caller, which must be the cluster owner. */
export function requireOwner(caller: Caller): Extract<Caller, { kind: "owner" }> {
  if (caller.kind === "anonymous")
    throw new UnauthenticatedError("this call needs the owner's certificate");
  if (caller.kind !== "owner")
    throw new PermissionDeniedError(
      `this call needs the owner's certificate, not ${presentedCertificate(caller.kind)}`,
    );
  return caller;
}

/** The caller, which must present a self-signed (ephemeral) certificate of a node not yet in the cluster. */
export function requireEphemeral(caller: Caller): Extract<Caller, { kind: "ephemeral" }> {
  if (caller.kind === "anonymous")
    throw new UnauthenticatedError("this call needs a self-signed node certificate");
  if (caller.kind !== "ephemeral") {
    throw new PermissionDeniedError(
      `this call needs a self-signed node certificate, not ${presentedCertificate(caller.kind)}`,
    );
  }
  return caller;
}
