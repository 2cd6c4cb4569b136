/**
 * The consensus view: the etcd members (voters and learners, with their
 * member IDs, which one leads raft, whether the curator leader's etcd member
 * reaches each), the curator leader and the raft leader with their terms, and
 * how many failures the consensus survives — the summary line of `metroctl
 * cluster members`, worded by the same function — from the consensus stream
 * (Management.GetClusterConsensus); each member's node, curator port and
 * health come from the cluster stream.
 */
import { useState } from "preact/hooks";
import { faultToleranceSummary } from "../../src/consensus-fields";
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
  const raft = consensus?.raft ?? null;
  const faultTolerance = consensus?.faultTolerance ?? null;
  const members = consensus?.members ?? [];
  const raftLeader = members.find((m) => m.raftLeader);
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
        Raft leader:{" "}
        <code data-testid="consensus-raft-leader">
          {raftLeader ? raftLeader.nodeId || raftLeader.memberId : "none known"}
        </code>
        {raft && (
          <>
            {" "}
            term <code data-testid="consensus-raft-term">{raft.term}</code>{" "}
            <span class="muted">(etcd's raft term: it grows with every etcd election)</span>
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
        learners.{" "}
        {faultTolerance && (
          <span
            data-testid="consensus-fault-tolerance"
            data-tolerates={faultTolerance.tolerates}
            class={
              faultTolerance.tolerates > faultTolerance.unreachableVoters
                ? "badge tolerant"
                : "badge not-tolerant"
            }
          >
            {faultToleranceSummary(faultTolerance)}
          </span>
        )}
      </p>
      <table class="tree" data-testid="consensus-members">
        <thead>
          <tr>
            <th>node</th>
            <th>etcd member ID</th>
            <th>voter / learner</th>
            <th>raft</th>
            <th>reachable</th>
            <th>curator</th>
            <th>health</th>
          </tr>
        </thead>
        <tbody>
          {members.map((m) => {
            const node = cluster.byId.get(m.nodeId);
            return (
              <tr
                key={m.memberId}
                data-member-id={m.memberId}
                data-status={m.status}
                data-raft-leader={m.raftLeader ? "yes" : "no"}
                data-reachability={m.reachability}
              >
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
                <td>{m.raftLeader && <span class="badge raft-leader">raft leader</span>}</td>
                <td>
                  <span class={`badge reach-${m.reachability}`}>{m.reachability}</span>
                </td>
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
