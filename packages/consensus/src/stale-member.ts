/**
 * Whether this node's etcd data belongs to the cluster it is told to join
 * (issue 38): after a restore from a backup (restore-member.ts) the cluster
 * runs as a new etcd cluster, with a new cluster ID, holding the old one's
 * records. A former member that comes back still holds the old cluster's
 * member data; started from it, it would never reach a quorum (its peers are
 * gone, or belong to the new cluster, whose members refuse its messages:
 * "cluster ID mismatch"). Given the consensus role again by the restored
 * cluster, it must drop that data and join as a learner.
 *
 * Dropping a member's data cannot be undone, so it is never done on anyone's
 * word (curator README, "threat model"): only on proof that the data belongs
 * to another etcd cluster than the one this node is told to join, and that
 * that cluster counts this node as a member. Both facts come from the data
 * and from the cluster itself:
 *
 * - The local side: the cluster and member IDs etcd recorded in its
 *   write-ahead log (the metadata record that begins every WAL segment),
 *   read from disk without starting etcd.
 * - The other side: a member of the cluster to join, asked over etcd's peer
 *   TLS (`GET /members` on its peer URL: etcd answers with its member list and
 *   the header `X-Etcd-Cluster-ID`). Its certificate must verify against the
 *   etcd CA this node's own data trusts (`data/etcd/peer-pki`): the join's
 *   peers and certificates come from a curator, but only a holder of the
 *   etcd CA's key (sealed in etcd) can answer as a member of a cluster of the
 *   same lineage. A restored cluster keeps its CA (the snapshot holds it).
 *
 * The decision ({@link decideMemberData}):
 *
 * | local data's cluster | the cluster to join | decision |
 * | --- | --- | --- |
 * | unreadable | any | retry: keep the data, ask again later |
 * | any | no member answered (or none verified) | retry |
 * | X | X | keep: a restart of the same member |
 * | X | Y, not listing this node's peer URL | retry: not (yet) told to join it |
 * | X | Y, listing this node's peer URL | wipe: join Y as a learner |
 *
 * Only etcd's data directory is removed ({@link wipeMemberData}): the node's
 * keys, credentials and sealed configuration stay, and the peer certificate
 * the join brings replaces the stale one.
 */
import { open, readdir, rm } from "node:fs/promises";
import { request } from "node:https";
import { join } from "node:path";
import type { NodeRoot } from "@metropolis/localstorage";
import { certificatePemCodec, encodePem, privateKeyToPem } from "@metropolis/pki";
import { MemberIdentityError } from "./errors";
import { memberDataPath } from "./member-data";
import type { JoinCluster } from "./status";

/** What etcd recorded in a member's data: the cluster it belongs to, and its member ID. */
export interface MemberIdentity {
  clusterId: bigint;
  memberId: bigint;
}

/** What a member of the cluster to join answered. */
export interface ClusterAnswer {
  /** The peer URL that answered. */
  peerUrl: string;
  clusterId: bigint;
  /** The peer URLs of every member it lists, learners and unstarted members included. */
  memberPeerUrls: string[];
}

/** The decision about a member's data; see the module comment. */
export type MemberDataDecision =
  | { action: "keep"; reason: string }
  | { action: "wipe"; reason: string }
  | { action: "retry"; reason: string };

/** An etcd ID as etcd prints it (hex, no padding). */
export function hexId(id: bigint): string {
  return id.toString(16);
}

/**
 * The decision about this node's etcd data, from what its WAL says (`local`:
 * an error when it could not be read) and what the cluster it is told to
 * join answered (`answers`: every member that answered, verified; when one
 * answers for the data's own cluster, the data is kept). Pure: see the
 * module comment's table.
 */
export function decideMemberData(
  local: MemberIdentity | MemberIdentityError,
  answers: readonly ClusterAnswer[],
  ownPeerUrl: string,
): MemberDataDecision {
  if (local instanceof MemberIdentityError) {
    return { action: "retry", reason: `${local.message}; the data is kept` };
  }
  const ours = `this node's etcd data belongs to cluster ${hexId(local.clusterId)} (member ${hexId(local.memberId)})`;
  // Any member answering for the data's own cluster keeps it; else the one that counts this node.
  const remote =
    answers.find((a) => a.clusterId === local.clusterId) ??
    answers.find((a) => a.memberPeerUrls.includes(ownPeerUrl)) ??
    answers[0];
  if (!remote) {
    return {
      action: "retry",
      reason: `${ours}; no member of the cluster it is told to join answered with a certificate of its etcd CA: whether that is another cluster is unknown, the data is kept`,
    };
  }
  if (remote.clusterId === local.clusterId) {
    return {
      action: "keep",
      reason: `${ours}, the cluster ${remote.peerUrl} answers for: the member restarts from it`,
    };
  }
  const theirs = `${remote.peerUrl} answers for cluster ${hexId(remote.clusterId)}`;
  if (!remote.memberPeerUrls.includes(ownPeerUrl)) {
    return {
      action: "retry",
      reason: `${ours}; ${theirs}, which has no member at ${ownPeerUrl}: this node is not (yet) added to it, the data is kept`,
    };
  }
  return {
    action: "wipe",
    reason: `${ours}; ${theirs}, which counts ${ownPeerUrl} as a member: the data is stale, removed, and the member joins that cluster as a learner`,
  };
}

/** Reads a protobuf varint at `at`; undefined past the end or beyond 64 bits. */
function varint(buf: Buffer, at: number): { value: bigint; next: number } | undefined {
  let value = 0n;
  for (let i = 0; i < 10 && at + i < buf.length; i++) {
    const byte = buf[at + i];
    value |= BigInt(byte & 0x7f) << BigInt(7 * i);
    if ((byte & 0x80) === 0) return { value, next: at + i + 1 };
  }
  return undefined;
}

/** The varint and bytes fields of a protobuf message, by field number (others skipped). */
function fields(buf: Buffer): Map<number, bigint | Buffer> | undefined {
  const out = new Map<number, bigint | Buffer>();
  let at = 0;
  while (at < buf.length) {
    const key = varint(buf, at);
    if (!key) return undefined;
    const field = Number(key.value >> 3n);
    const wire = Number(key.value & 7n);
    at = key.next;
    if (wire === 0) {
      const v = varint(buf, at);
      if (!v) return undefined;
      out.set(field, v.value);
      at = v.next;
    } else if (wire === 2) {
      const len = varint(buf, at);
      if (!len || len.next + Number(len.value) > buf.length) return undefined;
      out.set(field, buf.subarray(len.next, len.next + Number(len.value)));
      at = len.next + Number(len.value);
    } else if (wire === 1) at += 8;
    else if (wire === 5) at += 4;
    else return undefined;
  }
  return out;
}

/** walpb.Record's type of the metadata record (etcd's wal.metadataType). */
const metadataRecordType = 1n;
/** How much of a WAL segment is read: its first records (the file is preallocated to 64 MB). */
const walHeadBytes = 64 * 1024;

/**
 * The cluster and member ID etcd recorded in `storage`'s member data: the
 * metadata record (etcdserverpb.Metadata: NodeID, ClusterID) that begins
 * every segment of its write-ahead log. Each frame is a little-endian 64-bit
 * length (its top byte, when its high bit is set, holding the padding in its
 * low three bits) followed by an encoded walpb.Record (type, crc, data).
 * MemberIdentityError when there is no WAL or it does not read so.
 */
export async function readMemberIdentity(storage: NodeRoot): Promise<MemberIdentity> {
  const walDir = join(memberDataPath(storage), "wal");
  const segments = await readdir(walDir).catch((e: unknown) => {
    throw new MemberIdentityError(walDir, e instanceof Error ? e.message : String(e));
  });
  const first = segments.filter((s) => s.endsWith(".wal")).sort()[0];
  if (first === undefined) throw new MemberIdentityError(walDir, "no WAL segment");
  const path = join(walDir, first);
  const head = Buffer.alloc(walHeadBytes);
  const file = await open(path, "r").catch((e: unknown) => {
    throw new MemberIdentityError(path, e instanceof Error ? e.message : String(e));
  });
  let length: number;
  try {
    ({ bytesRead: length } = await file.read(head, 0, walHeadBytes, 0));
  } finally {
    await file.close();
  }
  const buf = head.subarray(0, length);
  let at = 0;
  while (at + 8 <= buf.length) {
    const lenField = buf.readBigUInt64LE(at);
    const padding = lenField >> 63n === 1n ? Number((lenField >> 56n) & 7n) : 0;
    const recordLength = Number(lenField & 0x00ff_ffff_ffff_ffffn);
    if (recordLength === 0) break;
    const start = at + 8;
    if (start + recordLength > buf.length) break;
    const record = fields(buf.subarray(start, start + recordLength));
    if (!record) throw new MemberIdentityError(path, `a record at byte ${at} does not decode`);
    const data = record.get(3);
    if (record.get(1) === metadataRecordType && data instanceof Buffer) {
      const metadata = fields(data);
      const memberId = metadata?.get(1);
      const clusterId = metadata?.get(2);
      if (typeof memberId !== "bigint" || typeof clusterId !== "bigint" || clusterId === 0n) {
        throw new MemberIdentityError(path, "its metadata record holds no cluster ID");
      }
      return { clusterId, memberId };
    }
    at = start + recordLength + padding;
  }
  throw new MemberIdentityError(path, `no metadata record in its first ${walHeadBytes} bytes`);
}

/** A string[] from JSON, or undefined. */
function stringArray(v: unknown): string[] | undefined {
  return Array.isArray(v) && v.every((s) => typeof s === "string") ? v : undefined;
}

/** The peer URLs of etcd's `/members` JSON (an array of members with `peerURLs`). */
function memberPeerUrls(body: string): string[] | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return undefined;
  }
  if (!Array.isArray(parsed)) return undefined;
  const urls: string[] = [];
  for (const member of parsed) {
    if (typeof member !== "object" || member === null || !("peerURLs" in member)) return undefined;
    const peerUrls = stringArray(member.peerURLs);
    if (!peerUrls) return undefined;
    urls.push(...peerUrls);
  }
  return urls;
}

/** What {@link askCluster} needs. */
export interface AskClusterOptions {
  /** The peers to ask (the join's, this node's own excluded by `ownPeerUrl`). */
  peers: readonly { peerUrl: string }[];
  /** The etcd CA certificate (DER) an answering member must be verified by. */
  trustedCa: Uint8Array;
  /** This node's peer certificate (DER, of that CA) and private key (32-byte seed): etcd wants a client certificate. */
  certificate: Uint8Array;
  nodePrivateKey: Uint8Array;
  ownPeerUrl: string;
  /** The address to connect from (this node's): etcd checks a client certificate against it. */
  localAddress?: string;
  /** How long a peer has to answer. Default 2 s. */
  timeoutMs?: number;
}

/** Asks one peer for `/members`. */
function askPeer(
  peerUrl: string,
  opts: AskClusterOptions,
): Promise<ClusterAnswer | { failure: string }> {
  return new Promise((resolve) => {
    let url: URL;
    try {
      url = new URL("/members", peerUrl);
    } catch {
      resolve({ failure: `${peerUrl}: not a URL` });
      return;
    }
    const req = request(url, {
      method: "GET",
      ca: encodePem("CERTIFICATE", opts.trustedCa),
      cert: encodePem("CERTIFICATE", opts.certificate),
      key: privateKeyToPem(opts.nodePrivateKey),
      localAddress: opts.localAddress,
      // Peers are dialled by IP, checked against the certificate's IP SANs; no SNI (RFC 6066).
      servername: "",
      timeout: opts.timeoutMs ?? 2000,
      agent: false,
    });
    req.on("timeout", () =>
      req.destroy(new Error(`no answer within ${opts.timeoutMs ?? 2000} ms`)),
    );
    req.on("error", (e) => resolve({ failure: `${peerUrl}: ${e.message}` }));
    req.on("response", (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        if (body.length < 1 << 20) body += chunk;
      });
      res.on("error", (e) => resolve({ failure: `${peerUrl}: ${e.message}` }));
      res.on("end", () => {
        const header = res.headers["x-etcd-cluster-id"];
        const urls = memberPeerUrls(body);
        if (
          res.statusCode !== 200 ||
          typeof header !== "string" ||
          !/^[0-9a-f]{1,16}$/.test(header)
        ) {
          resolve({ failure: `${peerUrl}: answered ${res.statusCode} without a cluster ID` });
        } else if (!urls) {
          resolve({ failure: `${peerUrl}: its member list does not read` });
        } else {
          resolve({ peerUrl, clusterId: BigInt(`0x${header}`), memberPeerUrls: urls });
        }
      });
    });
    req.end();
  });
}

/**
 * Asks the peers, all at once, which etcd cluster they serve and who its
 * members are, over etcd's peer TLS (see the module comment): every verified
 * answer, and why each other peer gave none. Takes at most `timeoutMs`.
 */
export async function askCluster(
  opts: AskClusterOptions,
): Promise<{ answers: ClusterAnswer[]; failures: string[] }> {
  const results = await Promise.all(
    opts.peers.filter((p) => p.peerUrl !== opts.ownPeerUrl).map((p) => askPeer(p.peerUrl, opts)),
  );
  const answers: ClusterAnswer[] = [];
  const failures: string[] = [];
  for (const r of results) {
    if ("failure" in r) failures.push(r.failure);
    else answers.push(r);
  }
  return { answers, failures };
}

/** What {@link checkMemberData} needs. */
export interface CheckMemberDataOptions {
  storage: NodeRoot;
  /** The join the cluster handed this node (its consensus role). */
  join: JoinCluster;
  nodePrivateKey: Uint8Array;
  /** This node's peer URL, `https://host:port`. */
  ownPeerUrl: string;
  localAddress?: string;
  timeoutMs?: number;
}

/**
 * The decision about `storage`'s etcd data given `join` (see the module
 * comment): its WAL's cluster ID against the answer of the cluster to join,
 * verified by the etcd CA the data trusts. Call it only with member data on
 * disk (member-data.ts `hasMemberData`).
 */
export async function checkMemberData(opts: CheckMemberDataOptions): Promise<MemberDataDecision> {
  const local = await readMemberIdentity(opts.storage).catch((e: unknown) => {
    if (e instanceof MemberIdentityError) return e;
    throw e;
  });
  let trustedCa: Uint8Array;
  try {
    trustedCa = await opts.storage.data.etcd.peerPKI.caCertificate.as(certificatePemCodec).read();
  } catch (e) {
    return {
      action: "retry",
      reason: `the etcd CA this node's data trusts does not read (${e instanceof Error ? e.message : String(e)}): no answer can be verified, the data is kept`,
    };
  }
  const { answers, failures } = await askCluster({
    peers: opts.join.peers,
    trustedCa,
    certificate: opts.join.certificate,
    nodePrivateKey: opts.nodePrivateKey,
    ownPeerUrl: opts.ownPeerUrl,
    localAddress: opts.localAddress,
    timeoutMs: opts.timeoutMs,
  });
  const decision = decideMemberData(local, answers, opts.ownPeerUrl);
  if (decision.action === "retry" && answers.length === 0 && failures.length > 0) {
    return { action: "retry", reason: `${decision.reason} (${failures.join("; ")})` };
  }
  return decision;
}

/**
 * Removes etcd's data directory of `storage` (and nothing else: not the
 * node's keys, credentials, sealed configuration, nor the peer PKI, which a
 * join replaces). Only on a {@link checkMemberData} "wipe".
 */
export async function wipeMemberData(storage: NodeRoot): Promise<void> {
  await rm(storage.data.etcd.data.fullPath, { recursive: true, force: true });
}
