/**
 * The directory worker (seed 004's "hostsfile"): keeps the cluster directory
 * on the ESP current. After a reboot the node finds its cluster through that
 * file (join dials the nodes it lists), so a directory written once at
 * enrolment goes stale as nodes come, go and move; this worker rewrites it
 * from the curator's view of the cluster.
 *
 * It never writes an empty directory: a node that sees no reachable nodes
 * (a cluster still starting, or a curator that lost its data) would
 * otherwise lock itself out of its cluster at its next boot. It keeps the
 * old file instead.
 *
 * From the same view it keeps the node's curator connection pointed at the
 * curators of the cluster now (`CuratorConnection.setEndpoints`): the
 * connection starts with the curators of enrolment time, and once those have
 * all left consensus it would find no leader, even while the node runs the
 * leader itself. The curators are the consensus members of the cluster's
 * records — the roles the curator assigned — never whoever reports running
 * one: a node's status is its own claim, and a node without the role that
 * claimed a curator would have been asked for the leader by every node.
 */
import {
  defaultCuratorPort,
  dialableDirectory,
  directoryCurators,
  formatCuratorAddress,
  type CuratorAddress,
} from "@metropolis/curator";
import { waitFor } from "@metropolis/event";
import { FileCorruptedError, type File } from "@metropolis/localstorage";
import { common, curator } from "@metropolis/proto";
import type { Runnable } from "@metropolis/supervisor";
import { ClusterView } from "./cluster-view";
import { openWatch, type WatchStream } from "./curator-calls";
import type { RoleserveValues } from "./values";

export interface DirectoryOptions {
  /** The directory file: `esp.metropolis.clusterDirectory` of the node's storage. */
  directory: File<common.ClusterDirectory>;
  /** The port curators serve on in this cluster. Default 7835. */
  curatorPort?: number;
}

/**
 * The directory of `nodes`: those UP and with a reported address, sorted by
 * ID so that the same cluster always encodes to the same bytes (the
 * curator's `dialableDirectory`, which `metroctl cluster directory` applies
 * to the leader's directory too: an operator's copy is this file's bytes).
 */
export function clusterDirectory(nodes: Iterable<curator.Node>): common.ClusterDirectory {
  const listed: common.ClusterDirectory_Node[] = [];
  for (const node of nodes) {
    if (node.state !== common.NodeState.UP) continue;
    const host = node.status?.externalAddress;
    listed.push({
      id: node.id,
      publicKey: node.publicKey,
      addresses: host ? [{ host }] : [],
      consensusMember: node.roles?.consensusMember !== undefined,
    });
  }
  return dialableDirectory({ nodes: listed });
}

/**
 * The directory worker: waits for `values.curatorConnection`, watches all
 * nodes (resuming, after its first run, from the view it kept: cluster-view.ts),
 * writes the directory of UP nodes with an address whenever it
 * changes (never an empty one), and points the connection at the running
 * curators. Healthy once the backlog was processed; fails when the watch
 * fails.
 */
export function directoryWorker(values: RoleserveValues, opts: DirectoryOptions): Runnable {
  // Outlives a run: the run a failover restarts resumes its watch from the
  // revision this view reached, and gets the nodes changed since, not all.
  const view = new ClusterView();
  return async (ctx) => {
    let stream: WatchStream | undefined;
    try {
      // The file's current content, so that a restart does not rewrite an
      // unchanged directory (the ESP is a small FAT partition on real nodes).
      let written = await readEncoded(opts.directory, (why) => ctx.logger.warn(why));
      const { connection } = await waitFor(values.curatorConnection, () => true, ctx.signal);

      const apply = async (event: curator.WatchResponse) => {
        // Before the backlog is complete the view is partial: writing it
        // would drop nodes that simply were not sent yet.
        if (!view.apply(event)) return false;
        const directory = clusterDirectory(view.nodes.values());
        values.clusterDirectory.set(directory);
        const endpoints = directoryCurators(directory, opts.curatorPort ?? defaultCuratorPort);
        if (endpoints.length > 0 && describe(endpoints) !== describe(connection.knownEndpoints)) {
          connection.setEndpoints(endpoints);
          ctx.logger.info(`curators to ask for the leader: ${describe(endpoints)}`);
        }
        if (directory.nodes.length === 0) {
          ctx.logger.debug("no UP node with an address: keeping the directory as it is");
          return true;
        }
        const encoded = Buffer.from(common.ClusterDirectory.encode(directory).finish());
        if (written?.equals(encoded)) return true;
        await opts.directory.write(directory);
        written = encoded;
        ctx.logger.info(
          `cluster directory written: ${directory.nodes.map((n) => `${n.id}@${n.addresses[0].host}`).join(", ")}`,
        );
        return true;
      };

      const opened = await openWatch(connection, view.begin().kind, ctx.signal);
      stream = opened.stream;
      let healthy = await apply(opened.first);
      if (healthy) ctx.healthy();
      for (;;) {
        const event = await stream.next(ctx.signal);
        if ((await apply(event)) && !healthy) {
          healthy = true;
          ctx.healthy();
        }
      }
    } catch (e) {
      if (ctx.signal.aborted) return;
      throw e;
    } finally {
      stream?.cancel();
    }
  };
}

/** The directory file's content as the encoding this worker would write, if it holds a directory. */
async function readEncoded(
  file: File<common.ClusterDirectory>,
  warn: (why: string) => void,
): Promise<Buffer | undefined> {
  if (!(await file.exists())) return undefined;
  try {
    return Buffer.from(common.ClusterDirectory.encode(await file.read()).finish());
  } catch (e) {
    // Replaced by the next write; the node has no better directory anyway.
    if (!(e instanceof FileCorruptedError)) throw e;
    warn(`the cluster directory on disk is corrupted: ${e.message}`);
    return undefined;
  }
}

/** Curators as `<node>@host:port`, for comparison and logs. */
function describe(curators: readonly CuratorAddress[]): string {
  return curators.map((c) => `${c.nodeId ?? "?"}@${formatCuratorAddress(c)}`).join(", ");
}
