/**
 * The command line of one etcd member. Kept apart from the service so that
 * what we ask of etcd is in one readable place.
 */

/** Raft timings. Tests use tight ones so a member serves within ~100 ms; production keeps etcd's. */
export interface EtcdTimings {
  heartbeatMs: number;
  electionMs: number;
}

/** Timings for members that all run on one machine, as in tests and the local cluster. */
export const localTimings: EtcdTimings = { heartbeatMs: 10, electionMs: 100 };

/**
 * etcd's own defaults, which a production member runs with (it passes no
 * timings): for a benchmark that stands for a production control plane.
 * Local timings send each follower a hundred heartbeats a second; three
 * members on loopback then keep a core a fifth busy between them at rest.
 */
export const etcdDefaultTimings: EtcdTimings = { heartbeatMs: 100, electionMs: 1000 };

/** A member of the initial cluster, by etcd name and peer URL. */
export interface EtcdPeer {
  name: string;
  peerUrl: string;
}

export interface EtcdMemberFlags {
  name: string;
  /** etcd's data directory (it creates `member/` in it). */
  dataDir: string;
  /** This member's peer URL, `https://host:port`. */
  peerUrl: string;
  /** The client socket, relative to the process's working directory (etcd only takes `unix://host:port`). */
  clientSocket: string;
  /** TLS material for peer traffic, as file paths. */
  peerTls: { caFile: string; certFile: string; keyFile: string; crlFile?: string };
  /** All members the cluster starts with, this one included. */
  initialCluster: readonly EtcdPeer[];
  clusterState: "new" | "existing";
  timings?: EtcdTimings;
}

export function etcdArgs(f: EtcdMemberFlags): string[] {
  const args = [
    `--name=${f.name}`,
    `--data-dir=${f.dataDir}`,
    // The client endpoint is a unix socket in the node's ephemeral directory:
    // only this node's own processes can reach it.
    `--listen-client-urls=unix://${f.clientSocket}`,
    `--advertise-client-urls=unix://${f.clientSocket}`,
    `--listen-peer-urls=${f.peerUrl}`,
    `--initial-advertise-peer-urls=${f.peerUrl}`,
    `--initial-cluster=${f.initialCluster.map((p) => `${p.name}=${p.peerUrl}`).join(",")}`,
    `--initial-cluster-state=${f.clusterState}`,
    `--peer-trusted-ca-file=${f.peerTls.caFile}`,
    `--peer-cert-file=${f.peerTls.certFile}`,
    `--peer-key-file=${f.peerTls.keyFile}`,
    "--peer-client-cert-auth=true",
    "--logger=zap",
    "--log-outputs=stderr",
    "--enable-v2=false",
    // Raft's pre-vote (the default from etcd 3.5; 3.4, Debian's, has it off):
    // a member cut off from the others asks whether it could win before it
    // raises its term. Without it, a member cut off for a few seconds came
    // back at a term dozens higher (189 → 264, e2e partition-faults' bridge)
    // and deposed the leader it rejoined.
    "--pre-vote=true",
  ];
  if (f.peerTls.crlFile) args.push(`--peer-crl-file=${f.peerTls.crlFile}`);
  if (f.timings) {
    args.push(
      `--heartbeat-interval=${f.timings.heartbeatMs}`,
      `--election-timeout=${f.timings.electionMs}`,
    );
  }
  return args;
}
