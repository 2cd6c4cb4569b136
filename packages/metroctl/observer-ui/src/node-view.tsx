/**
 * A node's view: what the cluster says about it, its supervision tree
 * (state colours, restarts, what each runnable says it is doing — a state
 * machine's state —, last error, a countdown to a pending restart),
 * the runnables restarted most, its supervisor reports as a timeline, and
 * its logs (DN, minimum level, follow). Each part is its own live stream of
 * the node's Debug or NodeManagement service, through the observer.
 */
import { useState } from "preact/hooks";
import {
  observedLogLevels,
  type LogBatch,
  type ObservedLogEntry,
  type ObservedNode,
  type ObservedReport,
  type ObservedRunnable,
  type ReportBatch,
  type TreeSnapshot,
} from "../../src/observe/observer-protocol";
import { heartbeatAge, type ClusterState } from "./cluster-state";
import { useEventStream, useTick } from "./observer-api";
import { StreamBanner } from "./stream-banner";
import { VirtualList } from "./virtual-list";

/** Most entries a list of reports or log lines keeps in the page. */
const keptInPage = 2000;

interface TreeRow {
  runnable: ObservedRunnable;
  depth: number;
}

function flatten(
  runnables: readonly ObservedRunnable[],
  depth: number,
  rows: TreeRow[],
): TreeRow[] {
  for (const runnable of runnables) {
    rows.push({ runnable, depth });
    flatten(runnable.children, depth + 1, rows);
  }
  return rows;
}

function SupervisionTree(props: { id: string }) {
  const [tree, setTree] = useState<TreeSnapshot | null>(null);
  const status = useEventStream(`/api/nodes/${props.id}/tree/events`, {
    tree: (data) => setTree(data as TreeSnapshot),
  });
  const now = useTick(250);
  const rows = tree ? flatten(tree.roots, 0, []) : [];
  const top = rows
    .filter((r) => r.runnable.restarts > 0)
    .sort((a, b) => b.runnable.restarts - a.runnable.restarts)
    .slice(0, 5);
  return (
    <div class="panel">
      <h3>Supervision tree</h3>
      <StreamBanner status={status} what="tree" />
      <table class="tree" data-testid="supervision-tree">
        <thead>
          <tr>
            <th>runnable</th>
            <th>state</th>
            <th>restarts</th>
            <th>detail</th>
          </tr>
        </thead>
        <tbody>
          {rows.map(({ runnable: r, depth }) => {
            const left =
              tree && r.nextRestartInMs !== null
                ? Math.max(0, r.nextRestartInMs - (now - tree.receivedAt)) / 1000
                : null;
            return (
              <tr key={r.dn} data-dn={r.dn} data-state={r.state}>
                <td style={{ paddingLeft: `${0.4 + depth * 1.1}em` }} title={r.dn}>
                  {r.name}
                </td>
                <td>
                  <span class={`badge run-${r.state}`}>{r.state}</span>
                </td>
                <td class={r.restarts > 0 ? "restarts" : ""}>{r.restarts}</td>
                <td class="detail">
                  {r.status !== null && (
                    <span class="status" data-testid="runnable-status" title={r.status}>
                      state: {r.status.split("\n")[0]}{" "}
                    </span>
                  )}
                  {r.givenUp && <b>gave up </b>}
                  {left !== null && <b class="countdown">restart in {left.toFixed(1)} s </b>}
                  {r.lastError !== null && (
                    <span class="error" title={r.lastError}>
                      {r.lastError.split("\n")[0]}
                    </span>
                  )}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
      <h3>Most restarted</h3>
      {top.length === 0 ? (
        <p class="muted">no runnable was restarted</p>
      ) : (
        <ol data-testid="top-restarts">
          {top.map(({ runnable: r }) => (
            <li key={r.dn}>
              <code>{r.dn}</code>: {r.restarts}
            </li>
          ))}
        </ol>
      )}
    </div>
  );
}

const reportDetail = (r: ObservedReport) => {
  const parts: string[] = [];
  if (r.kind === "started" && r.restarts) parts.push(`restart ${r.restarts}`);
  if (r.kind === "restart-scheduled") parts.push(`in ${r.delayMs} ms (attempt ${r.attempt})`);
  if (r.kind === "given-up") parts.push(`more than ${r.maxRestarts} restarts in ${r.periodMs} ms`);
  if (r.kind === "escalated") parts.push(`to ${r.escalatedTo ?? "the tree"}`);
  if (r.error) parts.push(`${r.error.name}: ${r.error.message.split("\n")[0]}`);
  if (r.dropped) parts.push(`(${r.dropped} reports dropped before this one)`);
  return parts.join("; ");
};

const time = (iso: string | null) => (iso === null ? "–" : iso.slice(11, 23));

function Reports(props: { id: string }) {
  const [reports, setReports] = useState<ObservedReport[]>([]);
  const [dn, setDn] = useState("");
  const status = useEventStream(`/api/nodes/${props.id}/reports/events`, {
    reports: (data) => {
      const batch = data as ReportBatch;
      setReports((old) =>
        (batch.reset ? batch.reports : [...old, ...batch.reports]).slice(-keptInPage),
      );
    },
  });
  const shown =
    dn === "" ? reports : reports.filter((r) => r.dn === dn || r.dn.startsWith(dn + "."));
  return (
    <div class="panel">
      <h3>Supervisor reports</h3>
      <StreamBanner status={status} what="reports" />
      <input
        class="filter"
        placeholder="DN prefix"
        value={dn}
        onInput={(e) => setDn(e.currentTarget.value)}
      />
      <VirtualList
        items={shown}
        rowHeight={22}
        height={260}
        stickToBottom
        testId="reports"
        row={(r) => (
          <div class={`timeline kind-${r.kind}`} data-kind={r.kind}>
            <span class="t">{time(r.time)}</span>
            <span class={`badge kind-${r.kind}`}>{r.kind}</span>
            <code>{r.dn}</code> <span class="detail">{reportDetail(r)}</span>
          </div>
        )}
      />
    </div>
  );
}

function Logs(props: { id: string }) {
  const [dn, setDn] = useState("");
  const [appliedDn, setAppliedDn] = useState("");
  const [level, setLevel] = useState<string>("info");
  const [follow, setFollow] = useState(true);
  const [entries, setEntries] = useState<ObservedLogEntry[]>([]);
  const query = new URLSearchParams({ dn: appliedDn, level, follow: follow ? "1" : "0" });
  const status = useEventStream(`/api/nodes/${props.id}/logs/events?${query}`, {
    logs: (data) => {
      const batch = data as LogBatch;
      setEntries((old) =>
        (batch.reset ? batch.entries : [...old, ...batch.entries]).slice(-keptInPage),
      );
    },
  });
  return (
    <div class="panel">
      <h3>Logs</h3>
      <StreamBanner status={status} what="logs" />
      <form
        class="logs-form"
        onSubmit={(e) => {
          e.preventDefault();
          setEntries([]);
          setAppliedDn(dn.trim());
        }}
      >
        <input
          placeholder="DN, e.g. root.roleserver"
          value={dn}
          onInput={(e) => setDn(e.currentTarget.value)}
        />
        <select
          value={level}
          onChange={(e) => {
            setEntries([]);
            setLevel(e.currentTarget.value);
          }}
        >
          {observedLogLevels.map((l) => (
            <option key={l} value={l}>
              {l} and above
            </option>
          ))}
        </select>
        <label>
          <input
            type="checkbox"
            checked={follow}
            onChange={(e) => {
              setEntries([]);
              setFollow(e.currentTarget.checked);
            }}
          />{" "}
          follow
        </label>
        <button type="submit">Apply</button>
      </form>
      <VirtualList
        items={entries}
        rowHeight={20}
        height={320}
        stickToBottom={follow}
        className="logs"
        testId="logs"
        row={(e) => (
          <div class={`log level-${e.level}`}>
            <span class="t">{time(e.time)}</span> <span class="lvl">{e.level}</span>{" "}
            <code>{e.dn}</code> {e.message}
          </div>
        )}
      />
    </div>
  );
}

function NodeSummary(props: { node: ObservedNode | undefined; cluster: ClusterState }) {
  const { node, cluster } = props;
  const now = useTick(1000);
  if (!node) return <p class="muted">not in the cluster's node list (yet)</p>;
  const age = heartbeatAge(node, cluster.clockOffsetMs, now);
  return (
    <div class="node-summary" data-health={node.health} data-state={node.state}>
      <span class={`state-${node.state}`}>{node.state}</span>
      <span class={`badge health-${node.health}`}>{node.health}</span>
      <span>heartbeat {age === null ? "never" : `${age.toFixed(1)} s ago`}</span>
      <span>roles: {node.roles.join(", ") || "none"}</span>
      <span>address: {node.address ?? "none yet"}</span>
      <span>version: {node.version ?? "–"}</span>
      {node.id === cluster.leaderId && <span class="badge leader">curator leader</span>}
    </div>
  );
}

/** The view of node `id`. */
export function NodeView(props: { id: string; cluster: ClusterState }) {
  const { id, cluster } = props;
  return (
    <section>
      <h2>
        <a href="#/">cluster</a> / <code data-testid="node-title">{id}</code>
      </h2>
      <NodeSummary node={cluster.byId.get(id)} cluster={cluster} />
      <div class="columns">
        <SupervisionTree id={id} />
        <div>
          <Reports id={id} />
          <Logs id={id} />
        </div>
      </div>
    </section>
  );
}
