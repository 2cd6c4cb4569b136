/**
 * `metroctl cluster backup -o FILE`: the owner takes a backup of the
 * cluster. The curator leader's etcd member takes a snapshot of the whole
 * database (etcd's Maintenance.Snapshot) and streams it through
 * Management.BackupCluster; the last message is the backup's header, with
 * the cluster secrets keyring wrapped for the owner's key.
 *
 * Before anything is written where the operator asked, everything is
 * checked: the snapshot's size and SHA-256 against the header, the header's
 * cluster CA against the one in the config dir, and the keyring opens with
 * the owner key. Taken with a backup credential (`access issue --role
 * backup`), the keyring is still sealed to the owner's key, which that
 * credential does not hold: the file is checked but for opening the keyring. The snapshot goes to a temporary file (mode 0600) next to
 * the target while it streams; the backup file is then written atomically
 * (backup-file.ts: temporary file, synced, renamed) and the temporary
 * snapshot removed, so FILE is either the whole checked backup or untouched.
 * On a terminal a spinner shows the bytes received.
 */
import { createHash, randomBytes } from "node:crypto";
import { open, rm } from "node:fs/promises";
import { basename, dirname, join, resolve } from "node:path";
import { openBackupKeyring, readBackupFile, writeBackupFile } from "@metropolis/consensus";
import { api } from "@metropolis/proto";
import { withOwnerSession } from "./cluster-session";
import type { CommandContext } from "./command-context";
import { configFiles } from "./config-dir";
import { ConfigFileError, TrustError } from "./errors";
import { writeLine } from "./io";
import { writeJson, type OutputFormat } from "./output";
import { withProgress } from "./spinner";

/** The largest chunk metroctl accepts from the stream (the server sends at most 1 MiB). */
const maxChunkBytes = 4 * 1024 * 1024;

/** What `cluster backup -o json` prints. */
export interface BackupView {
  /** The backup file written. */
  file: string;
  /** Its size in bytes. */
  sizeBytes: number;
  /** The etcd revision read just before the snapshot began: every write up to it is in it. */
  revision: number;
  /** When the snapshot began (ISO 8601). */
  takenAt: string;
  /** The node whose etcd member took it. */
  takenBy: string;
  /** The snapshot's SHA-256, hex. */
  sha256: string;
  /** How many node records the cluster had. */
  nodes: number;
  /** How long the backup took, ms. */
  elapsedMs: number;
}

/** Flags of `cluster backup`, as given. */
export interface BackupOptions {
  output: string;
  format: OutputFormat;
}

const mib = (bytes: number) => `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;

/** `cluster backup -o FILE [--format json]` */
export async function clusterBackup(ctx: CommandContext, opts: BackupOptions): Promise<void> {
  const started = performance.now();
  const target = resolve(opts.output);
  const ownerKey = await ctx.configDir.readOwnerKey();
  if (!ownerKey) {
    throw new ConfigFileError(
      ctx.configDir.path(configFiles.ownerKey),
      "no owner key: only the owner (or a backup credential) can take a backup",
    );
  }
  // undefined: the owner's own config dir; "backup": a backup credential's.
  const role = await ctx.configDir.readAccessRole();
  const ca = await ctx.configDir.readCaCertificate();
  if (!ca) {
    throw new ConfigFileError(
      ctx.configDir.path(configFiles.caCertificate),
      "no cluster CA: run `metroctl takeownership` first",
    );
  }
  const snapshotPath = join(
    dirname(target),
    `.${basename(target)}.${randomBytes(6).toString("hex")}.snapshot.tmp`,
  );
  const abort = new AbortController();
  const interrupted = () => abort.abort();
  ctx.signal?.addEventListener("abort", interrupted, { once: true });
  try {
    const header = await withOwnerSession(ctx, (session) =>
      withProgress(ctx.io.stderr, "taking a backup of the cluster", async (progress) => {
        // The temporary file first: a target directory that cannot be written fails before the stream opens.
        const out = await open(snapshotPath, "wx", 0o600);
        try {
          const { stream } = await session.backupCluster(abort.signal);
          // Its errors reach the loop below; a cancellation after it ended has nobody else to go to.
          stream.on("error", () => undefined);
          const hash = createHash("sha256");
          let received = 0;
          let expected: number | undefined;
          let finished: api.BackupHeader | undefined;
          for await (const message of stream) {
            const m: api.BackupClusterResponse = message;
            const kind = m.kind;
            if (kind === undefined) throw new TrustError("the backup stream sent an empty message");
            if (finished) throw new TrustError("the backup stream went on after its header");
            switch (kind.$case) {
              case "started":
                expected = kind.started.sizeBytes;
                break;
              case "chunk":
                if (kind.chunk.length > maxChunkBytes) {
                  throw new TrustError(
                    `the backup stream sent a chunk of ${kind.chunk.length} bytes, more than ${maxChunkBytes}`,
                  );
                }
                hash.update(kind.chunk);
                received += kind.chunk.length;
                await out.write(kind.chunk);
                progress.update(
                  `receiving the backup: ${mib(received)}${expected ? ` of ${mib(expected)}` : ""}`,
                );
                break;
              case "finished":
                finished = kind.finished;
                break;
            }
          }
          if (!finished) throw new TrustError("the backup stream ended before its header");
          if (finished.snapshotSize !== received) {
            throw new TrustError(
              `the backup's header says ${finished.snapshotSize} bytes, but ${received} came`,
            );
          }
          const sha256 = hash.digest();
          if (!sha256.equals(finished.snapshotSha256)) {
            throw new TrustError(
              `the snapshot received has SHA-256 ${sha256.toString("hex")}, the header says ${finished.snapshotSha256.toString("hex")}`,
            );
          }
          await out.sync();
          return finished;
        } finally {
          await out.close();
        }
      }),
    );
    if (!header.clusterCaCertificate.equals(ca.der)) {
      throw new TrustError(
        `the backup names another cluster CA than ${ctx.configDir.path(configFiles.caCertificate)}`,
      );
    }
    if (role === undefined && !header.ownerPublicKey.equals(ownerKey.publicKey)) {
      throw new TrustError("the backup's keyring is sealed to another key than this owner's");
    }
    // Checks the keyring's binding to this very snapshot before the file is kept.
    await writeBackupFile(target, header, snapshotPath);
    try {
      const written = await readBackupFile(target);
      if (role === undefined) openBackupKeyring(written, ownerKey.privateKey);
    } catch (e) {
      await rm(target, { force: true });
      throw e;
    }
    const view: BackupView = {
      file: target,
      sizeBytes: header.snapshotSize,
      revision: header.revision,
      takenAt: new Date(header.takenAtUnixMs).toISOString(),
      takenBy: header.takenByNodeId,
      sha256: header.snapshotSha256.toString("hex"),
      nodes: header.nodeVersions.length,
      elapsedMs: Math.round(performance.now() - started),
    };
    if (opts.format === "json") {
      writeJson(ctx.io.stdout, view);
      return;
    }
    writeLine(
      ctx.io.stdout,
      `backup written to ${view.file}: ${mib(view.sizeBytes)} of etcd at revision ${view.revision}, ` +
        `${view.nodes} nodes, taken by ${view.takenBy} at ${view.takenAt}; sha256 ${view.sha256}; ` +
        (role === undefined
          ? `its secrets open only with this owner key: keep the key and the file apart`
          : `its secrets open only with the cluster owner's key, not this ${role} credential's`),
    );
  } finally {
    ctx.signal?.removeEventListener("abort", interrupted);
    abort.abort();
    await rm(snapshotPath, { force: true });
  }
}
