/**
 * The consensus view: which nodes hold the consensus role (an etcd member
 * and a curator each), which curators run, and which one leads. What the
 * owner's API does not report (etcd voter or learner, etcd member IDs, the
 * leader's term) is said to be missing rather than guessed.
 */
import type { ClusterState } from "./cluster-state";
import { StreamBanner } from "./stream-banner";

const notReported = <span class="muted">not reported by the API</span>;

/** The consensus view. */
export function ConsensusView(props: { cluster: ClusterState }) {
  const { cluster } = props;
  const members = cluster.nodes.filter((n) => n.consensus.member || n.curator.running);
  return (
    <section>
      <StreamBanner status={cluster.status} what="cluster" />
      <p>
        Curator leader: <code data-testid="consensus-leader">{cluster.leaderId ?? "unknown"}</code>;
        its term: {notReported}.
      </p>
      <table class="tree" data-testid="consensus-members">
        <thead>
          <tr>
            <th>node</th>
            <th>consensus role</th>
            <th>etcd voter / learner</th>
            <th>curator</th>
            <th>health</th>
          </tr>
        </thead>
        <tbody>
          {members.map((n) => (
            <tr key={n.id} data-node-id={n.id}>
              <td>
                <a href={`#/node/${n.id}`}>{n.id}</a>
              </td>
              <td>{n.consensus.member ? "member" : "none (curator still running)"}</td>
              <td>{notReported}</td>
              <td>
                {n.curator.running ? `running on port ${n.curator.port ?? "?"}` : "not running"}
                {n.id === cluster.leaderId && <span class="badge leader">leader</span>}
              </td>
              <td>
                <span class={`badge health-${n.health}`}>{n.health}</span>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <p class="muted">
        The owner's Management API reports the consensus role and running curators of each node, and
        which curator leads; etcd's own membership (voters, learners, member IDs) and the leader's
        election term are only visible to nodes (Curator.GetConsensusStatus), so they are not shown.
      </p>
    </section>
  );
}
