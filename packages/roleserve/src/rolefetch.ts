/**
 * The role fetch worker: the only source of `values.localRoles`, the roles
 * the cluster gave this node, which decide what the launchers run.
 *
 * The roles come from the curator, but a consensus member must be able to
 * start its etcd member before any curator is reachable: when the whole
 * cluster is powered off and on, no curator runs until consensus is back,
 * and consensus is back only once the members start theirs. So the roles
 * are persisted on the data partition at every change, and loaded from there
 * first (seed 004). The curator's view then replaces them as soon as this
 * node can watch itself through it.
 *
 * It is also where a node learns that the cluster deleted it (a tombstone
 * of itself, or a refused watch) or decommissioned it (its record
 * DECOMMISSIONED): it sets `values.disowned`. A record DECOMMISSIONED with
 * `wipe_requested` sets `values.wipeOrdered` first: the curator's word,
 * on this authenticated stream, is the only thing that makes a node erase
 * its storage (a refused watch is not: it proves nothing about the record).
 */
import { rm } from "node:fs/promises";
import { status } from "@grpc/grpc-js";
import { waitFor } from "@metropolis/event";
import { FileCorruptedError, type File } from "@metropolis/localstorage";
import { common, type curator } from "@metropolis/proto";
import type { Runnable } from "@metropolis/supervisor";
import { openWatch, type WatchStream } from "./curator-calls";
import { CuratorStreamError } from "./errors";
import type { RoleserveValues } from "./values";

export interface RoleFetchOptions {
  /** Where the roles are persisted: `data.node.roles` of the node's storage. */
  roles: File<common.NodeRoles>;
}

/** Roles compared as their encoding: two equal messages encode to the same bytes. */
function encodeRoles(roles: common.NodeRoles): Buffer {
  return Buffer.from(common.NodeRoles.encode(roles).finish());
}

/**
 * The role fetch worker: sets `values.localRoles` from the persisted roles
 * at once, then from a Watch of this node through the curator, persisting
 * every change. Healthy after the curator's first answer; fails when the
 * watch fails.
 */
export function roleFetchWorker(values: RoleserveValues, opts: RoleFetchOptions): Runnable {
  // What localRoles holds, kept across restarts of this runnable: a restart
  // (after a failed watch) must not announce unchanged roles again, since
  // every set() wakes the launchers.
  let published: Buffer | undefined;
  const publish = (roles: common.NodeRoles, encoded: Buffer) => {
    if (published?.equals(encoded)) return false;
    published = encoded;
    values.localRoles.set(roles);
    return true;
  };

  // What the disk holds (no file is no roles, see persist(); undefined is a
  // corrupted file or one not read yet), kept across restarts too: only this
  // worker writes the file, so it is read once, by the first run. A restart
  // follows every failover, on every node at once, and re-reading the file
  // each time was 3 % of the scale simulator's nodes' CPU then.
  let persisted: Buffer | undefined;
  let loaded = false;

  return async (ctx) => {
    let stream: WatchStream | undefined;
    try {
      if (!loaded) {
        const stored = await readPersisted(opts.roles, (why) => ctx.logger.warn(why));
        loaded = true;
        if (stored !== "corrupted") persisted = encodeRoles(stored ?? {});
        if (stored !== undefined && stored !== "corrupted") {
          if (publish(stored, encodeRoles(stored))) ctx.logger.info("roles loaded from disk");
        }
      }

      const { connection, credentials } = await waitFor(
        values.curatorConnection,
        () => true,
        ctx.signal,
      );
      const nodeId = credentials.nodeId;
      const apply = async (event: curator.WatchResponse) => {
        if (event.nodeTombstones.some((t) => t.nodeId === nodeId)) {
          // What such a node should stop is the cluster manager's call, not
          // a guess made here: the roles are kept, the news is passed on.
          ctx.logger.warn(`this node (${nodeId}) was deleted from the cluster`);
          values.disowned.set("the owner deleted it while it ran");
        }
        for (const node of event.nodes) {
          if (node.id !== nodeId) continue;
          const roles = common.NodeRoles.fromPartial(node.roles ?? {});
          const encoded = encodeRoles(roles);
          // Persisted before published: after a crash in between, the disk
          // holds what the services were about to follow, never less.
          if (!persisted?.equals(encoded)) {
            await persist(opts.roles, roles, encoded);
            persisted = encoded;
          }
          if (publish(roles, encoded))
            ctx.logger.info(`roles from the curator: ${describe(roles)}`);
          // Decommissioned: its roles are gone (persisted above) and its
          // certificate revoked; a stream opened before the revocation still
          // delivers this, so the node need not wait to be refused.
          if (node.state === common.NodeState.DECOMMISSIONED) {
            if (node.wipeRequested) {
              ctx.logger.warn(
                `this node (${nodeId}) was decommissioned, and its record asks it to wipe its storage`,
              );
              values.wipeOrdered.set(true);
              values.disowned.set("the owner decommissioned it, asking it to wipe its storage");
            } else {
              ctx.logger.warn(`this node (${nodeId}) was decommissioned`);
              values.disowned.set("the owner decommissioned it");
            }
          }
        }
      };

      const opened = await openWatch(
        connection,
        { $case: "nodeInCluster", nodeInCluster: { nodeId } },
        ctx.signal,
      ).catch((e: unknown) => {
        // A node may always watch itself, unless it was deleted while it was
        // away: its certificate is revoked (UNAUTHENTICATED), or — a deletion
        // that did not revoke it, as before revocation existed — the cluster has
        // no record of it (PERMISSION_DENIED). The curator's only refusals of a
        // node's watch of itself.
        if (
          e instanceof CuratorStreamError &&
          (e.code === status.UNAUTHENTICATED || e.code === status.PERMISSION_DENIED)
        ) {
          values.disowned.set(`the cluster refused it: ${e.message}`);
        }
        throw e;
      });
      stream = opened.stream;
      await apply(opened.first);
      ctx.healthy();
      for (;;) await apply(await stream.next(ctx.signal));
    } catch (e) {
      if (ctx.signal.aborted) return;
      throw e;
    } finally {
      stream?.cancel();
    }
  };
}

/**
 * Writes `roles` atomically. No roles are persisted as no file: their
 * encoding is empty, and an empty file is one the protobuf codec refuses to
 * read (it cannot tell it from a truncated one). A node without roles has
 * nothing to start before the curator answers, which is what a missing file
 * means.
 */
async function persist(
  file: File<common.NodeRoles>,
  roles: common.NodeRoles,
  encoded: Buffer,
): Promise<void> {
  if (encoded.length > 0) await file.write(roles);
  else await rm(file.fullPath, { force: true });
}

/**
 * The persisted roles: undefined when there is no file, "corrupted" when it
 * does not decode. A corrupted file is reported and ignored rather than
 * failed on: failing would only repeat at every restart, while the curator's
 * answer will overwrite it.
 */
async function readPersisted(
  file: File<common.NodeRoles>,
  warn: (why: string) => void,
): Promise<common.NodeRoles | "corrupted" | undefined> {
  if (!(await file.exists())) return undefined;
  try {
    return await file.read();
  } catch (e) {
    if (!(e instanceof FileCorruptedError)) throw e;
    warn(`ignoring the persisted roles: ${e.message}`);
    return "corrupted";
  }
}

/** The roles held, for logs. */
function describe(roles: common.NodeRoles): string {
  const held = [
    roles.consensusMember && "consensus member",
    roles.kubernetesController && "kubernetes controller",
    roles.kubernetesWorker && "kubernetes worker",
  ].filter(Boolean);
  return held.length > 0 ? held.join(", ") : "none";
}
