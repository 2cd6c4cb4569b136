/**
 * Whether this node holds an etcd member's data: the one test of it, for
 * the consensus service (restart from disk, or bootstrap / join) and for the
 * control plane's stand-down (start the member once more, to hear etcd
 * remove it, or drop nothing).
 *
 * etcd keeps a member in `member/` of its data directory, but `member/`
 * alone does not make one: etcd 3.4 creates `member/snap` before it checks
 * a join against the running members, and leaves it when it gives the join
 * up (etcd-log.ts `refusesJoinForNow`). Only the write-ahead log, created
 * once the member starts, says that etcd has been a member on this data;
 * started from a directory without it and only itself as its peer, etcd
 * would fail every start.
 */
import { access } from "node:fs/promises";
import { join } from "node:path";
import type { NodeRoot } from "@metropolis/localstorage";

/** The directory etcd keeps its member in, in `storage`'s etcd data directory. */
export function memberDataPath(storage: NodeRoot): string {
  return join(storage.data.etcd.data.fullPath, "member");
}

/** Whether `storage` holds the data of a member etcd has started: its write-ahead log. */
export async function hasMemberData(storage: NodeRoot): Promise<boolean> {
  return access(join(memberDataPath(storage), "wal")).then(
    () => true,
    () => false,
  );
}
