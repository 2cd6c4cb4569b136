/**
 * Whether this node should run a control plane (consensus and curator), and
 * with what — reduced from the roleserver's values, as in seed 004's
 * "map/reduce into a control plane startup".
 *
 * A node bootstrapping a cluster runs one until it knows its roles (the
 * bootstrap gives it the consensus role); any other node runs one exactly
 * while the cluster gives it the consensus-member role.
 */
import type { JoinCluster } from "@metropolis/consensus";
import { combine, type Watcher } from "@metropolis/event";
import type { common } from "@metropolis/proto";
import type { NodeCredentials } from "./node-credentials";
import type { BootstrapData, EnrolmentSecrets, RoleserveValues } from "./values";

export type ControlPlaneStartup =
  | {
      run: false;
      /** The node's credentials, to start the member an earlier membership left on disk. */
      credentials?: NodeCredentials;
    }
  | {
      run: true;
      enrolment: EnrolmentSecrets;
      /** Set when this node bootstraps the cluster: consensus and CA are created here. */
      bootstrap?: BootstrapData;
      /** The node's credentials; unset while bootstrapping (the bootstrap creates them). */
      credentials?: NodeCredentials;
      /** Set for a member that has yet to join etcd (ignored once etcd has data on disk). */
      join?: JoinCluster;
    };

/** The join data the curator put into the consensus role, if any. */
export function joinFromRoles(roles: common.NodeRoles): JoinCluster | undefined {
  const member = roles.consensusMember;
  if (!member || member.peers.length === 0) return undefined;
  return {
    peers: member.peers.map((p) => ({ name: p.name, peerUrl: p.peerUrl })),
    caCertificate: member.caCertificate,
    certificate: member.peerCertificate,
    crl: member.peerCrl,
  };
}

/** Watches the values and reduces them to startups; `next()` returns the newest one. */
export class StartupWatcher {
  private readonly enrolment: Watcher<EnrolmentSecrets>;
  private readonly bootstrap: Watcher<BootstrapData | undefined>;
  private readonly cluster: Watcher<{
    roles: common.NodeRoles;
    connection: { credentials: NodeCredentials };
  }>;
  private bootstrapData: BootstrapData | undefined;
  /** The enrolment, once `next()` returned. */
  secrets: EnrolmentSecrets | undefined;

  constructor(values: RoleserveValues) {
    this.enrolment = values.enrolment.watch();
    this.bootstrap = values.bootstrapData.watch();
    this.cluster = combine({
      roles: values.localRoles,
      connection: values.curatorConnection,
    }).watch();
  }

  /**
   * The first call returns as soon as the startup can be decided; later calls
   * wait for the roles or credentials to change.
   */
  async next(signal: AbortSignal): Promise<ControlPlaneStartup> {
    if (!this.secrets) {
      this.secrets = await this.enrolment.get({ signal });
      this.bootstrapData = await this.bootstrap.get({ signal });
      // A bootstrapping node has no credentials and may not know its roles
      // for a while: it starts at once.
      if (this.bootstrapData)
        return { run: true, enrolment: this.secrets, bootstrap: this.bootstrapData };
    }
    const { roles, connection } = await this.cluster.get({ signal });
    if (!roles.consensusMember) return { run: false, credentials: connection.credentials };
    return {
      run: true,
      enrolment: this.secrets,
      bootstrap: this.bootstrapData,
      credentials: connection.credentials,
      join: joinFromRoles(roles),
    };
  }

  close(): void {
    this.enrolment.close();
    this.bootstrap.close();
    this.cluster.close();
  }
}
