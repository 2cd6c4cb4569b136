/**
 * The consensus view: the etcd members (voters and learners, with their
 * member IDs) and the curator leader with its term, from the consensus
 * stream (Management.GetClusterConsensus); each member's node, curator port
 * and health come from the cluster stream.
 */
import { useState } from "preact/hooks";
import type { ConsensusSnapshot } from "../../src/observe/observer-protocol";
import type { ClusterState } from "./cluster-state";
import { useEventStream } from "./observer-api";
import { StreamBanner } from "./stream-banner";

/** The consensus view. */
export function ConsensusView(props: { cluster: ClusterState }) {
  const { cluster } = props;
  const [consensus, setConsensus] = useState<ConsensusSnapshot | null>(null);
  const status = useEventStream("/api/consensus/events", {
    consensus: (data) => setConsensus(data as ConsensusSnapshot),
  });
  const leader = consensus?.leader ?? null;
  const members = consensus?.members ?? [];
  const named = new Set(members.map((m) => m.nodeId));
  // A node given the consensus role whose etcd member has not started yet is not named by etcd.
  const waiting = cluster.nodes.filter((n) => n.consensus.member && !named.has(n.id));
  return (
    <section>
      <StreamBanner status={status} what="consensus" />
      <StreamBanner status={cluster.status} what="cluster" />
      <p>
        Curator leader:{" "}
        <code data-testid="consensus-leader">
          {leader?.nodeId ?? cluster.leaderId ?? "unknown"}
        </code>
        {leader && (
          <>
            {" "}
            at {leader.host}:{leader.port}, term{" "}
            <code data-testid="consensus-term">{leader.term}</code>{" "}
            <span class="muted">
              (its election key's etcd revision: it grows with every change of leader)
            </span>
          </>
        )}
      </p>
      <p>
        etcd members:{" "}
        <span data-testid="consensus-voters">
          {members.filter((m) => m.status === "voter").length}
        </span>{" "}
        voters,{" "}
        <span data-testid="consensus-learners">
          {members.filter((m) => m.status === "learner").length}
        </span>{" "}
        learners.
      </p>
      <table class="tree" data-testid="consensus-members">
        <thead>
          <tr>
            <th>node</th>
            <th>etcd member ID</th>
            <th>voter / learner</th>
            <th>curator</th>
            <th>health</th>
          </tr>
        </thead>
        <tbody>
          {members.map((m) => {
            const node = cluster.byId.get(m.nodeId);
            return (
              <tr key={m.memberId} data-member-id={m.memberId} data-status={m.status}>
                <td>
                  {m.nodeId === "" ? (
                    <span class="muted">not started yet</span>
                  ) : (
                    <a href={`#/node/${m.nodeId}`}>{m.nodeId}</a>
                  )}
                </td>
                <td>
                  <code>{m.memberId}</code>
                </td>
                <td>{m.status}</td>
                <td>
                  {m.curatorRunning
                    ? `running on port ${node?.curator.port ?? "?"}`
                    : "not running"}
                  {m.nodeId !== "" && m.nodeId === leader?.nodeId && (
                    <span class="badge leader">leader</span>
                  )}
                </td>
                <td>
                  {node ? <span class={`badge health-${node.health}`}>{node.health}</span> : "?"}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
      {waiting.length > 0 && (
        <p data-testid="consensus-waiting">
          Given the consensus role, no started etcd member yet:{" "}
          {waiting.map((n) => (
            <a key={n.id} href={`#/node/${n.id}`}>
              {n.id}{" "}
            </a>
          ))}
        </p>
      )}
    </section>
  );
}
