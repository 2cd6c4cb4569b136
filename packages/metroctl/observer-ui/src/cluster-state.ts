/**
 * The cluster as the page knows it: the nodes of the last snapshot with
 * every delta since applied, the leader, and the offset between the
 * server's clock and the browser's (heartbeat ages are computed here, every
 * second, from when the leader heard each node).
 */
import { useMemo, useRef, useState } from "preact/hooks";
import type {
  ClusterDelta,
  ClusterSnapshot,
  ObservedNode,
} from "../../src/observe/observer-protocol";
import { useEventStream, type StreamStatus } from "./observer-api";

/** What the cluster stream gave so far. */
export interface ClusterState {
  /** Every node, sorted by ID. */
  nodes: ObservedNode[];
  byId: ReadonlyMap<string, ObservedNode>;
  leaderId: string | null;
  /** The server's clock minus the browser's, in ms. */
  clockOffsetMs: number;
  /** Whether a snapshot or a delta arrived yet. */
  loaded: boolean;
  status: StreamStatus;
}

/** Seconds since the leader heard `node`, now; null if never. */
export function heartbeatAge(
  node: ObservedNode,
  clockOffsetMs: number,
  now: number,
): number | null {
  if (node.heartbeatAt === null) return null;
  return Math.max(0, (now + clockOffsetMs - node.heartbeatAt) / 1000);
}

/** Follows the cluster stream while mounted. */
export function useClusterState(): ClusterState {
  const nodes = useRef(new Map<string, ObservedNode>());
  const [version, setVersion] = useState(0);
  const [leaderId, setLeaderId] = useState<string | null>(null);
  const [clockOffsetMs, setClockOffsetMs] = useState(0);
  const [loaded, setLoaded] = useState(false);
  const status = useEventStream("/api/cluster/events", {
    snapshot: (data) => {
      const snapshot = data as ClusterSnapshot;
      nodes.current = new Map(snapshot.nodes.map((n) => [n.id, n]));
      setLeaderId(snapshot.leaderId);
      setClockOffsetMs(snapshot.serverTime - Date.now());
      setLoaded(true);
      setVersion((v) => v + 1);
    },
    delta: (data) => {
      const delta = data as ClusterDelta;
      for (const node of delta.upserts) nodes.current.set(node.id, node);
      for (const id of delta.removed) nodes.current.delete(id);
      setLeaderId(delta.leaderId);
      setClockOffsetMs(delta.serverTime - Date.now());
      setLoaded(true);
      setVersion((v) => v + 1);
    },
  });
  const sorted = useMemo(
    () => [...nodes.current.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)),
    [version],
  );
  return { nodes: sorted, byId: nodes.current, leaderId, clockOffsetMs, loaded, status };
}
