/** Waiting on the cluster status for the states node services care about. */
import type { Watchable } from "@metropolis/event";
import { common } from "@metropolis/proto";
import { DisownedError } from "./errors";
import type { ClusterStatus } from "./status";

/**
 * Resolves with the first status in which this node is HOME; rejects with
 * `DisownedError` as soon as it is DISOWNING (it will never be home again),
 * or with the abort reason.
 */
export async function getHome(
  status: Watchable<ClusterStatus>,
  signal?: AbortSignal,
): Promise<ClusterStatus> {
  const watcher = status.watch();
  try {
    for (;;) {
      const s = await watcher.get({ signal });
      if (s.state === common.ClusterState.HOME) return s;
      if (s.state === common.ClusterState.DISOWNING) throw new DisownedError();
    }
  } finally {
    watcher.close();
  }
}
