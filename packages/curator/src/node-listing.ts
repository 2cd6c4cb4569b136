/**
 * Owners' listings of nodes (Management.GetNodes), encoded once per record.
 *
 * A listing of every node is the leader's most expensive answer: at 5,000
 * nodes, building the api.Node messages and encoding them took 20–30 ms of
 * the leader's loop (800 KB), and ten owners listing once a second spent a
 * quarter of a core on it — most of all during a failover, when the new
 * leader has the least to spare. Yet between two listings a node's record
 * rarely changes; only its health and heartbeat age do, and those are the
 * leader's own, not the record's.
 *
 * So each record's part of its api.Node (fields 1–6) is encoded once and
 * kept beside the record object — the leader's copy of the node records
 * (node-record-mirror.ts) replaces the object when the record changes, so a
 * changed record is encoded afresh and a dropped one is collected — and a
 * listing is those bytes, each followed by its health and heartbeat age
 * (fields 7 and 8), in one buffer:
 *
 *   GetNodesResponse = for each node: tag(nodes) len [ record part | health age ]
 *
 * Protocol Buffers merge the encodings of two messages of a type written
 * one after the other, and these two parts set disjoint fields: the bytes
 * are exactly those `GetNodesResponse.encode` writes for the same listing
 * (node-listing.test.ts compares them).
 *
 * Answered as an {@link EncodedNodeList}, which `managementService`
 * (management-service.ts) sends as it is; served under the stock
 * `api.ManagementService`, it is decoded and encoded again (correct, only
 * slower).
 */
import { api, BinaryWriter } from "@metropolis/proto";
import type { LeaderContext } from "./leader-context";
import { recordView } from "./management-nodes";
import type { StoredNode } from "./node-record";

/** The record part (fields 1–6) of each record object's api.Node; see the module comment. */
const recordParts = new WeakMap<StoredNode, Uint8Array>();

/** A GetNodes answer already encoded; `nodes` decodes it (for a server that needs the messages). */
export class EncodedNodeList implements api.GetNodesResponse {
  constructor(
    /** The encoded GetNodesResponse. */
    readonly bytes: Buffer,
  ) {}

  get nodes(): api.Node[] {
    return api.GetNodesResponse.decode(this.bytes).nodes;
  }
}

/** The part of a node's api.Node that only its record decides, encoded. */
function recordPart(stored: StoredNode): Uint8Array {
  let part = recordParts.get(stored);
  if (part === undefined) {
    part = api.Node.encode(recordView(stored)).finish();
    recordParts.set(stored, part);
  }
  return part;
}

/** An api.Node with no field set: what each entry's health and heartbeat age are written over. */
const noFields = api.Node.create();

/** The GetNodes answer listing `nodes`, in their order. */
export function encodeNodeList(
  ctx: Pick<LeaderContext, "heartbeats">,
  nodes: readonly StoredNode[],
): EncodedNodeList {
  const writer = new BinaryWriter();
  // Every node judged at one moment (and the clock read once, not 10,000 times).
  const now = ctx.heartbeats.now();
  for (const stored of nodes) {
    writer.uint32(10).fork().raw(recordPart(stored)); // field 1 of GetNodesResponse: nodes
    api.Node.encode(
      {
        ...noFields,
        health: ctx.heartbeats.health(stored.id, now),
        timeSinceHeartbeatMs: ctx.heartbeats.sinceLast(stored.id, now),
      },
      writer,
    );
    writer.join();
  }
  const bytes = writer.finish();
  return new EncodedNodeList(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
}
