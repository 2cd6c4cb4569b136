/**
 * The cluster view: every node in one virtualised table (state, roles,
 * health, heartbeat age, labels, consensus membership, the leader), counts
 * by state and health, a filter, and each node's actions.
 */
import { useMemo, useState } from "preact/hooks";
import type { ObservedNode } from "../../src/observe/observer-protocol";
import { heartbeatAge, type ClusterState } from "./cluster-state";
import { NodeActionDialog, type NodeAction } from "./node-actions";
import { StreamBanner } from "./stream-banner";
import { useTick } from "./observer-api";
import { VirtualList } from "./virtual-list";

const rowHeight = 30;

const matches = (node: ObservedNode, filter: string) => {
  if (filter === "") return true;
  const text = [
    node.id,
    node.state,
    node.health,
    node.address ?? "",
    ...node.roles,
    ...Object.entries(node.labels).map(([k, v]) => `${k}=${v}`),
  ]
    .join(" ")
    .toLowerCase();
  return filter
    .toLowerCase()
    .split(/\s+/)
    .every((word) => text.includes(word));
};

const countBy = (nodes: readonly ObservedNode[], key: (n: ObservedNode) => string) => {
  const counts = new Map<string, number>();
  for (const n of nodes) counts.set(key(n), (counts.get(key(n)) ?? 0) + 1);
  return [...counts].sort();
};

/** The cluster view. */
export function ClusterView(props: { cluster: ClusterState }) {
  const { cluster } = props;
  const now = useTick(1000);
  const [filter, setFilter] = useState("");
  const [dialog, setDialog] = useState<{ node: ObservedNode; action: NodeAction } | null>(null);
  const shown = useMemo(
    () => cluster.nodes.filter((n) => matches(n, filter)),
    [cluster.nodes, filter],
  );
  const height = Math.max(200, Math.min(shown.length * rowHeight, window.innerHeight - 230));

  const row = (node: ObservedNode) => {
    const age = heartbeatAge(node, cluster.clockOffsetMs, now);
    const leader = node.id === cluster.leaderId;
    return (
      <div
        class={`node-row health-${node.health}`}
        data-node-id={node.id}
        data-state={node.state}
        data-health={node.health}
      >
        <span class="c-id">
          <a href={`#/node/${node.id}`}>{node.id}</a>
          {leader && <span class="badge leader">leader</span>}
        </span>
        <span class={`c-state state-${node.state}`}>{node.state}</span>
        <span class="c-health">
          <span class={`badge health-${node.health}`}>{node.health}</span>
        </span>
        <span class="c-age">{age === null ? "–" : `${age.toFixed(age < 10 ? 1 : 0)} s`}</span>
        <span class="c-roles">{node.roles.join(", ") || "–"}</span>
        <span class="c-consensus">
          {node.consensus.member ? (node.curator.running ? "member, curator" : "member") : "–"}
        </span>
        <span class="c-address">{node.address ?? "–"}</span>
        <span
          class="c-labels"
          title={Object.entries(node.labels)
            .map(([k, v]) => `${k}=${v}`)
            .join("\n")}
        >
          {Object.entries(node.labels)
            .map(([k, v]) => `${k}=${v}`)
            .join(" ")}
        </span>
        <span class="c-actions">
          {node.state === "NEW" && (
            <button data-action="approve" onClick={() => setDialog({ node, action: "approve" })}>
              Approve
            </button>
          )}
          <button data-action="roles" onClick={() => setDialog({ node, action: "roles" })}>
            Roles
          </button>
          <button data-action="labels" onClick={() => setDialog({ node, action: "labels" })}>
            Labels
          </button>
        </span>
      </div>
    );
  };

  return (
    <section>
      <StreamBanner status={cluster.status} what="cluster" />
      <div class="summary" data-testid="cluster-summary">
        <span>
          <b data-testid="node-count">{cluster.nodes.length}</b> nodes
        </span>
        {countBy(cluster.nodes, (n) => n.state).map(([state, count]) => (
          <span key={state} class={`state-${state}`}>
            {state} {count}
          </span>
        ))}
        {countBy(cluster.nodes, (n) => n.health).map(([health, count]) => (
          <span key={health} class={`badge health-${health}`}>
            {health} {count}
          </span>
        ))}
        <span>
          leader: <code data-testid="leader">{cluster.leaderId ?? "unknown"}</code>
        </span>
      </div>
      <input
        class="filter"
        placeholder="filter: words of ID, state, health, role, label=value"
        value={filter}
        onInput={(e) => setFilter(e.currentTarget.value)}
      />
      <div class="node-row header">
        <span class="c-id">node</span>
        <span class="c-state">state</span>
        <span class="c-health">health</span>
        <span class="c-age">heartbeat</span>
        <span class="c-roles">roles</span>
        <span class="c-consensus">consensus</span>
        <span class="c-address">address</span>
        <span class="c-labels">labels</span>
        <span class="c-actions" />
      </div>
      {!cluster.loaded ? (
        <p>waiting for the cluster…</p>
      ) : (
        <VirtualList
          items={shown}
          rowHeight={rowHeight}
          height={height}
          row={row}
          testId="node-list"
        />
      )}
      {dialog && (
        <NodeActionDialog
          node={cluster.byId.get(dialog.node.id) ?? dialog.node}
          action={dialog.action}
          onClose={() => setDialog(null)}
        />
      )}
    </section>
  );
}
