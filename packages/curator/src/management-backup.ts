/**
 * Management.BackupCluster: a consistent snapshot of the cluster's etcd
 * data, taken by the curator leader's own etcd member (etcd's
 * Maintenance.Snapshot, as `etcdctl snapshot save`), streamed to the owner.
 *
 *   owner ──BackupCluster──▶ leader ──Maintenance.Snapshot──▶ its etcd member
 *         ◀── started (size, revision) ── chunk … chunk ── finished (header)
 *
 * The secrets in the snapshot stay sealed with the cluster secrets keyring;
 * the `finished` header carries that keyring wrapped for the cluster owner's
 * Ed25519 key (the initial owner's, whether the owner or a backup credential
 * of access-roles.ts takes the backup), bound to
 * the snapshot's SHA-256 (backup-file.ts in @metropolis/consensus), and the
 * cluster's storage policy, read from its configuration before the snapshot
 * began: a restore creates its data partition with it before it can read the
 * configuration in the snapshot. The owner writes the backup file from these
 * messages (`metroctl cluster backup`).
 *
 * Each chunk is written with backpressure (the next one is read from etcd
 * once the call's buffer has drained), so a slow owner holds a few chunks in
 * the leader's memory, never the database. One backup runs at a time.
 */
import { createHash } from "node:crypto";
import type { ServerWritableStream } from "@grpc/grpc-js";
import { status } from "@grpc/grpc-js";
import {
  backupKeyringAt,
  etcdCertificateKv,
  memberClient,
  snapshotMember,
} from "@metropolis/consensus";
import { api, common } from "@metropolis/proto";
import { CuratorError } from "./errors";
import type { LeaderContext } from "./leader-context";
import { readConfiguration } from "./management-configuration";

/** The largest chunk a BackupCluster stream sends. */
export const maxBackupChunkBytes = 1024 * 1024;

/** A BackupCluster call, as grpc-js gives it to the handler. */
export type BackupClusterCall = ServerWritableStream<
  api.BackupClusterRequest,
  api.BackupClusterResponse
>;

/** Writes `message`, then waits until the call's buffer has room again (or the call ends). */
async function send(
  call: BackupClusterCall,
  message: api.BackupClusterResponse,
  ended: AbortSignal,
): Promise<void> {
  if (call.write(message)) return;
  await new Promise<void>((resolve) => {
    const done = () => {
      call.removeListener("drain", done);
      ended.removeEventListener("abort", done);
      resolve();
    };
    call.once("drain", done);
    ended.addEventListener("abort", done, { once: true });
  });
}

/**
 * Streams a backup of the cluster to `call`, sealing the keyring to
 * `ownerPublicKey` (the cluster owner's, whoever calls: the owner or a backup credential), until done or
 * `ended` aborts.
 */
export async function backupCluster(
  ctx: LeaderContext,
  call: BackupClusterCall,
  ownerPublicKey: Uint8Array,
  ended: AbortSignal,
): Promise<void> {
  const takenAt = Date.now();
  const [nodes, ca, configuration] = await Promise.all([
    ctx.nodes.list(),
    ctx.clusterCa.load(etcdCertificateKv(ctx.kv)),
    readConfiguration(ctx),
  ]);
  if (ca === null) throw new CuratorError(status.INTERNAL, "the cluster CA does not exist");
  const client = memberClient(ctx.consensus.clientSocket);
  try {
    const snapshot = await snapshotMember(client, ended);
    const hash = createHash("sha256");
    let sent = 0;
    let started = false;
    for await (const blob of snapshot.chunks) {
      if (!started) {
        started = true;
        await send(
          call,
          {
            kind: {
              $case: "started",
              started: {
                sizeBytes: snapshot.sizeBytes() ?? 0,
                revision: Number(snapshot.revision),
              },
            },
          },
          ended,
        );
      }
      for (let at = 0; at < blob.length; at += maxBackupChunkBytes) {
        const chunk = blob.subarray(at, at + maxBackupChunkBytes);
        hash.update(chunk);
        sent += chunk.length;
        await send(call, { kind: { $case: "chunk", chunk } }, ended);
      }
    }
    if (ended.aborted) return;
    const sha256 = hash.digest();
    const self = nodes.find(({ id }) => id === ctx.self.nodeId);
    const header: api.BackupHeader = {
      clusterCaCertificate: Buffer.from(ca.certificate.der),
      etcdClusterId: snapshot.clusterId,
      etcdMemberId: snapshot.memberId,
      takenByNodeId: ctx.self.nodeId,
      revision: Number(snapshot.revision),
      takenAtUnixMs: takenAt,
      nodeVersions: nodes.map(({ id, node }) => ({
        nodeId: id,
        version: node.status?.version ?? "",
        state: common.nodeStateToJSON(node.state),
      })),
      snapshotSize: sent,
      snapshotSha256: sha256,
      ownerPublicKey: Buffer.from(ownerPublicKey),
      sealedKeyring: ctx.consensus.wrapKeyringFor(ownerPublicKey, backupKeyringAt(sha256)),
      nodeVersion: self?.node.status?.version ?? "",
      storagePolicy: configuration.config.storagePolicy,
    };
    await send(call, { kind: { $case: "finished", finished: header } }, ended);
    ctx.logger.info(
      `backup of ${sent} bytes at revision ${snapshot.revision} streamed to the owner`,
    );
  } finally {
    client.close();
  }
}
