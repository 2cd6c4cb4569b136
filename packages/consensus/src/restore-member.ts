/**
 * Restoring a cluster's etcd from a backup's snapshot as a new one-member
 * cluster on this node (`metropolis-node --recover-from`), as Talos's
 * `bootstrap --recover-from` and k3s's `--cluster-reset` do:
 *
 *   1. `etcdctl snapshot restore` into a fresh directory next to the member's
 *      data directory (etcd checks the snapshot's own hash), with this node
 *      as the only member and a new cluster token: the restored cluster has a
 *      new etcd cluster ID, so a member of the old cluster cannot be taken
 *      for one of this one. Renamed into place only once complete.
 *   2. etcd is started on it for the restore's own writes (peer TLS from a
 *      throwaway CA: nobody else is a member), on the node's unix socket.
 *   3. Every lease is revoked: the old curator leader's election key and
 *      anything else held by a process of the old cluster goes at once
 *      instead of after its TTL.
 *   4. With the keyring the owner unsealed from the backup: the etcd CA
 *      (sealed in etcd) issues this node's peer certificate, recorded like
 *      every member's; the durable peer PKI and CRL are written under
 *      `data/etcd/` (the key encrypted under the data directory's key); this
 *      member's wrapped copy of the keyring is stored and the old members'
 *      copies dropped.
 *   5. `work` runs on the restored cluster (the curator's records).
 *   6. etcd is stopped. The node then starts its member from this data as
 *      after any restart.
 *
 * etcd 3.4's etcdctl has no `--bump-revision`/`--mark-compacted` (etcdutl
 * 3.5.x and 3.6 have): the restored revision is the snapshot's, plus the
 * restore's own writes. Nobody watches the restored etcd from an earlier
 * revision: its only clients are this node's new processes, and other nodes
 * reach it through the curator, which they dial and list afresh.
 *
 * Anything failing removes what this wrote (the data directory, the peer PKI
 * and CRL): the node is left as it was found.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdir, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import type { NodeRoot } from "@metropolis/localstorage";
import { nodeIdFromPublicKey, publicKeyFromPrivateKey } from "@metropolis/pki";
import { ClusterSecrets } from "./cluster-secrets";
import { ConsensusClient } from "./consensus-client";
import { memberClient, waitReady } from "./etcd-client";
import { etcdArgs, type EtcdTimings } from "./etcd-flags";
import { ConsensusConfigError } from "./errors";
import { clientSocketName, memberSocketPath } from "./member-socket";
import { keyringCopyKey, listCopies } from "./keyring-store";
import { wrapKeyring } from "./keyring-wrap";
import { hasMemberData } from "./member-data";
import {
  createPeerCa,
  issueMemberCertificate,
  loadPeerCa,
  peerTlsPem,
  writePeerTlsFiles,
} from "./peer-pki";
import { loadPeerCrl, recordMemberCertificate } from "./peer-revocation";
import { hexMemberId } from "./raft-status";
import type { SecretKeyring } from "./secret-keyring";
import type { PeerAddress } from "./status";

/** How long the restore's etcd may take to serve, and to stop. */
const etcdStartTimeoutMs = 30_000;
const etcdStopTimeoutMs = 15_000;

/** What {@link restoreMember} needs. */
export interface RestoreMemberOptions {
  /** The node's storage, placed, its data directory mounted (new), its ephemeral directory in memory. */
  storage: NodeRoot;
  /** This node's Ed25519 private key (32-byte seed): its member's identity. */
  nodePrivateKey: Uint8Array;
  /** Where the member listens for peers (default port 7834). */
  peer: Required<PeerAddress>;
  /** The cluster secrets keyring, unsealed from the backup with the owner's key. */
  keyring: SecretKeyring;
  /** The snapshot (extracted from a checked backup file). */
  snapshotPath: string;
  timings?: EtcdTimings;
  /** Default "etcd" and "etcdctl", searched on PATH. */
  etcdBinary?: string;
  etcdctlBinary?: string;
  /** Told each step. */
  log?: (line: string) => void;
}

/** What {@link restoreMember} did. */
export interface RestoredMember<T> {
  /** The new etcd cluster's ID and this member's, hex: another cluster than the backup's. */
  clusterId: string;
  memberId: string;
  /** The etcd revision once the restore's writes were done. */
  revision: bigint;
  /** How many leases of the old cluster were revoked. */
  leasesRevoked: number;
  /** The old members whose keyring copies were dropped. */
  droppedKeyringCopies: string[];
  /** What `work` returned. */
  result: T;
}

/** Runs `command` to its end; rejects naming it with its stderr when it fails. */
function run(command: string, args: readonly string[], env: NodeJS.ProcessEnv): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env, stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr?.on("data", (chunk: Buffer) => {
      if (stderr.length < 16_384) stderr += chunk.toString();
    });
    child.on("error", (e) =>
      reject(new ConsensusConfigError(`consensus: cannot run ${command}: ${e.message}`)),
    );
    child.on("exit", (code, signal) => {
      if (code === 0) resolve();
      else
        reject(
          new ConsensusConfigError(
            `consensus: ${command} ${args[0] ?? ""} ${args[1] ?? ""} failed (${signal ?? `exit ${code}`}): ${stderr.trim()}`,
          ),
        );
    });
  });
}

/** Stops `child` (SIGTERM, then SIGKILL after the grace period) and waits for its exit. */
async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), etcdStopTimeoutMs);
  await exited;
  clearTimeout(timer);
}

/**
 * Restores the snapshot at `opts.snapshotPath` as this node's one-member
 * etcd cluster and runs `work` on it; see the module comment. Refuses a node
 * that holds etcd data already.
 */
export async function restoreMember<T>(
  opts: RestoreMemberOptions,
  work: (client: ConsensusClient) => Promise<T>,
): Promise<RestoredMember<T>> {
  const { storage, nodePrivateKey, peer, keyring } = opts;
  const log = opts.log ?? (() => undefined);
  const publicKey = publicKeyFromPrivateKey(nodePrivateKey);
  const nodeId = nodeIdFromPublicKey(publicKey);
  if (await hasMemberData(storage)) {
    throw new ConsensusConfigError(
      `consensus: ${storage.data.etcd.data.fullPath} holds etcd data already: a restore needs a node without any`,
    );
  }
  const peerUrl = `https://${peer.host}:${peer.port}`;
  const dataDir = storage.data.etcd.data.fullPath;
  const restoring = `${dataDir}.restoring-${randomBytes(4).toString("hex")}`;
  const eph = storage.ephemeral.consensus.fullPath;
  const tlsDir = join(eph, "restore-tls");
  // Checked before anything is written: the restored member serves on one socket, the node on the other.
  const socket = "restore.sock:0";
  const socketPath = memberSocketPath(eph, socket);
  memberSocketPath(eph, clientSocketName);
  let etcd: ChildProcess | undefined;
  let done = false;
  try {
    await storage.data.etcd.mkdirAll();
    await rm(dataDir, { recursive: true, force: true });
    log(`restoring etcd's snapshot into ${dataDir} as member ${nodeId} at ${peerUrl}`);
    await run(
      opts.etcdctlBinary ?? "etcdctl",
      [
        "snapshot",
        "restore",
        opts.snapshotPath,
        `--name=${nodeId}`,
        `--data-dir=${restoring}`,
        `--initial-cluster=${nodeId}=${peerUrl}`,
        `--initial-advertise-peer-urls=${peerUrl}`,
        `--initial-cluster-token=metropolis-restore-${randomBytes(8).toString("hex")}`,
      ],
      { ...process.env, ETCDCTL_API: "3" },
    );
    await rename(restoring, dataDir);

    // A throwaway peer identity: the member has no peer to talk to while the restore writes.
    await mkdir(tlsDir, { recursive: true, mode: 0o700 });
    const throwaway = await createPeerCa();
    const throwawayCertificate = await issueMemberCertificate(throwaway, publicKey, peer.host);
    const tls = await writePeerTlsFiles(
      tlsDir,
      peerTlsPem(throwaway.certificate.der, throwawayCertificate.der, nodePrivateKey),
    );
    await mkdir(eph, { recursive: true, mode: 0o700 });
    await rm(socketPath, { force: true });
    const args = etcdArgs({
      name: nodeId,
      dataDir,
      peerUrl,
      clientSocket: socket,
      peerTls: tls,
      initialCluster: [{ name: nodeId, peerUrl }],
      clusterState: "existing",
      timings: opts.timings,
    });
    etcd = spawn(opts.etcdBinary ?? "etcd", args, {
      cwd: eph,
      stdio: ["ignore", "ignore", "pipe"],
    });
    let etcdLog = "";
    etcd.stderr?.on("data", (chunk: Buffer) => {
      etcdLog = (etcdLog + chunk.toString()).slice(-8192);
    });
    const exited = new Promise<never>((_, reject) =>
      etcd?.once("exit", (code, signal) =>
        reject(
          new ConsensusConfigError(
            `consensus: etcd exited (${signal ?? `exit ${code}`}) while restoring: ${etcdLog.trim().split("\n").slice(-3).join(" | ")}`,
          ),
        ),
      ),
    );
    exited.catch(() => undefined);
    const client = memberClient(socketPath);
    try {
      await Promise.race([waitReady(client, AbortSignal.timeout(etcdStartTimeoutMs)), exited]);
      const status = await client.maintenance.status();
      const clusterId = hexMemberId(status.header.cluster_id);
      const memberId = hexMemberId(status.header.member_id);
      log(
        `etcd serves the restored data (cluster ${clusterId}, revision ${status.header.revision})`,
      );

      const { leases } = await client.leaseClient.leaseLeases();
      for (const lease of leases) await client.leaseClient.leaseRevoke({ ID: lease.ID });
      log(`revoked ${leases.length} leases of the old cluster`);

      const secrets = new ClusterSecrets();
      secrets.apply(keyring, BigInt(status.header.revision));
      const root = ConsensusClient.root(client, secrets);
      const consensus = root.sub("consensus");
      const ca = await loadPeerCa(consensus);
      const certificate = await issueMemberCertificate(ca, publicKey, peer.host);
      await recordMemberCertificate(consensus, nodeId, certificate);
      const pem = peerTlsPem(ca.certificate.der, certificate.der, nodePrivateKey);
      const pkiFiles = storage.data.etcd.peerPKI;
      await pkiFiles.caCertificate.write(Buffer.from(pem.caCertificate));
      await pkiFiles.certificate.write(Buffer.from(pem.certificate));
      await pkiFiles.key.write(Buffer.from(pem.privateKey));
      await storage.data.etcd.peerCRL.write((await loadPeerCrl(consensus)).der);

      const dropped: string[] = [];
      for (const copy of await listCopies(root.kv)) {
        if (copy.nodeId === nodeId) continue;
        await root.kv.delete().key(copy.key).exec();
        dropped.push(copy.nodeId);
      }
      const at = keyringCopyKey(nodeId);
      await root.kv
        .put(at)
        .value(wrapKeyring(keyring, publicKey, at))
        .exec();
      log(`keyring wrapped for ${nodeId}; dropped the copies of ${dropped.length} old members`);

      const result = await work(root);
      const revision = BigInt((await client.maintenance.status()).header.revision);
      done = true;
      return {
        clusterId,
        memberId,
        revision,
        leasesRevoked: leases.length,
        droppedKeyringCopies: dropped,
        result,
      };
    } finally {
      client.close();
    }
  } finally {
    if (etcd) await stopChild(etcd);
    await rm(tlsDir, { recursive: true, force: true });
    await rm(restoring, { recursive: true, force: true });
    if (!done) {
      await rm(dataDir, { recursive: true, force: true });
      await rm(storage.data.etcd.peerPKI.fullPath, { recursive: true, force: true });
      await rm(storage.data.etcd.peerCRL.fullPath, { force: true });
    }
  }
}
