/**
 * A member's snapshot (etcd's Maintenance.Snapshot, member-snapshot.ts)
 * written to a file: what `metroctl cluster backup` streams through the
 * curator, without the backup file's header. The tests of the restore and
 * of stale member data make their snapshots with it.
 */
import { createWriteStream } from "node:fs";
import { memberClient } from "./etcd-client";
import { snapshotMember } from "./member-snapshot";

/**
 * Takes a snapshot of the member serving on unix socket `socket` into
 * `path` (mode 0600), within `timeoutMs`; resolves to the revision it holds.
 * @param timeoutMs @default 30000
 */
export async function snapshotMemberToFile(
  socket: string,
  path: string,
  timeoutMs = 30_000,
): Promise<bigint> {
  const client = memberClient(socket);
  try {
    const snapshot = await snapshotMember(client, AbortSignal.timeout(timeoutMs));
    const out = createWriteStream(path, { mode: 0o600 });
    for await (const chunk of snapshot.chunks) {
      if (!out.write(chunk))
        await new Promise<void>((resolve) => out.once("drain", () => resolve()));
    }
    await new Promise<void>((resolve, reject) =>
      out.end((e?: Error | null) => (e ? reject(e) : resolve())),
    );
    return snapshot.revision;
  } finally {
    client.close();
  }
}
