/**
 * The size of an etcd member's database against its quota, from the
 * member's own /metrics (its unix client socket): `etcd_mvcc_db_total_size_in_bytes`
 * (the file on disk, what the quota limits) and
 * `etcd_server_quota_backend_bytes`. etcd raises the NOSPACE alarm and
 * refuses writes once the first reaches the second.
 */
import { RaftStatusError } from "./errors";
import { fetchMetrics, raftStatusTimeoutMs } from "./raft-status";

/** A member's database size and quota, in bytes. */
export interface DatabaseSize {
  /** The database file's size. */
  sizeBytes: number;
  /** The quota etcd enforces on it. */
  quotaBytes: number;
}

/** The value of the unlabelled gauge `name` in Prometheus text `metrics`, or undefined. */
export function gaugeValue(metrics: string, name: string): number | undefined {
  for (const line of metrics.split("\n")) {
    if (!line.startsWith(name)) continue;
    const sample = /^(\S+?)(?:\{[^}]*\})?\s+(\S+)/.exec(line);
    if (sample === null || sample[1] !== name) continue;
    const value = Number(sample[2]);
    if (Number.isFinite(value)) return value;
  }
  return undefined;
}

/**
 * The database size and quota of the member at `socketPath`, within
 * `timeoutMs`. Rejects with RaftStatusError when the member does not
 * answer, or its metrics lack either gauge.
 */
export async function readDatabaseSize(
  socketPath: string,
  timeoutMs = raftStatusTimeoutMs,
): Promise<DatabaseSize> {
  const metrics = await fetchMetrics(socketPath, timeoutMs).catch((e: unknown) => {
    throw new RaftStatusError(
      `the etcd member did not answer its metrics within ${timeoutMs} ms: ${e instanceof Error ? e.message : String(e)}`,
      { cause: e },
    );
  });
  const sizeBytes = gaugeValue(metrics, "etcd_mvcc_db_total_size_in_bytes");
  const quotaBytes = gaugeValue(metrics, "etcd_server_quota_backend_bytes");
  if (sizeBytes === undefined || quotaBytes === undefined) {
    throw new RaftStatusError(
      "the etcd member's metrics lack etcd_mvcc_db_total_size_in_bytes or etcd_server_quota_backend_bytes",
    );
  }
  return { sizeBytes, quotaBytes };
}
