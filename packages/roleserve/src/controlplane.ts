/**
 * The control plane launcher: runs this node's consensus member and curator
 * while the node should run a control plane (see controlplane-startup.ts).
 *
 *   decide ──run──▶ consensus ──▶ bootstrap? ──▶ curator ──▶ healthy … roles flip / etcd stops ──▶ fail
 *      └──no run──▶ stand down (below) ─────────────────────▶ healthy … roles flip ───────────────▶ fail
 *
 * One straight run, no state machine: it never adjusts a running control
 * plane. When "should run" flips, or etcd stops under the curator, it fails
 * with a typed error, the supervisor cancels its children (stopping etcd and
 * the curator) and starts it again, and the new run decides afresh — seed
 * 004's launcher pattern, where the supervisor's restart is the state machine.
 *
 * While it serves, the sealed configuration holds the cluster CA and the
 * cluster unlock key, so that the node can come back on its own when the
 * whole cluster was powered off (see priv.SealedConfiguration).
 *
 * Standing down destroys nothing on the roles' word alone. The roles come
 * from a curator; removing a member's etcd data and its sealed unlock key
 * cannot be undone, and a node that did it on a wrong answer would be one
 * member less for good (issue 11: a rogue curator made every member wipe
 * itself). So a node with etcd data starts its member from that data and
 * lets etcd decide: etcd reports the member's removal itself (its cluster
 * committed it), and only then are the data and the unlock key removed.
 * Until then the member runs — the node is still one of the cluster's
 * voters, whatever its roles say — and the leader's membership reconciler
 * removes it if it really should go.
 */
import { rm } from "node:fs/promises";
import {
  ConsensusService,
  defaultPeerPort,
  hasMemberData,
  memberDataPath,
  type ConsensusStatus,
  type EtcdTimings,
} from "@metropolis/consensus";
import {
  bootstrapCluster,
  Curator,
  defaultCuratorPort,
  type RunningConsensus,
} from "@metropolis/curator";
import { waitFor } from "@metropolis/event";
import { sealConfiguration, type NodeRoot } from "@metropolis/localstorage";
import { nodeIdFromPublicKey, publicKeyFromPrivateKey } from "@metropolis/pki";
import { common, priv } from "@metropolis/proto";
import type { RunContext, Runnable } from "@metropolis/supervisor";
import { StartupWatcher, type ControlPlaneStartup } from "./controlplane-startup";
import {
  ConsensusRemovedError,
  ConsensusStoppedError,
  ControlPlaneInputError,
  RolesChangedError,
} from "./errors";
import {
  credentialsPem,
  nodeCuratorConnection,
  saveCredentials,
  type NodeCredentials,
} from "./node-credentials";
import type { EnrolmentSecrets, RoleserveValues } from "./values";

export interface ControlPlaneConfig {
  storage: NodeRoot;
  /** The machine key the sealed configuration is sealed with. */
  machineKeyPath: string;
  /** This node's address: etcd peers and curator clients reach it there. */
  host: string;
  /** Default 7834. */
  consensusPort?: number;
  /** Default 7835. */
  curatorPort?: number;
  /** etcd's raft timings; etcd's defaults when unset. */
  timings?: EtcdTimings;
  etcdBinary?: string;
  autopromoteIntervalMs?: number;
  /** Curator election lease TTL. Default 10 s. */
  leaderTtlSeconds?: number;
  heartbeatTimeoutMs?: number;
  reconcileIntervalMs?: number;
}

type RunStartup = Extract<ControlPlaneStartup, { run: true }>;
type StandDown = Extract<ControlPlaneStartup, { run: false }>;

/** One run of the launcher: see the module comment. */
class ControlPlaneLauncher {
  private readonly startups: StartupWatcher;

  constructor(
    private readonly values: RoleserveValues,
    private readonly config: ControlPlaneConfig,
  ) {
    this.startups = new StartupWatcher(values);
  }

  private get consensusPort(): number {
    return this.config.consensusPort ?? defaultPeerPort;
  }

  private get curatorPort(): number {
    return this.config.curatorPort ?? defaultCuratorPort;
  }

  /** Runs until the roles flip or etcd stops, then fails (the supervisor restarts it). */
  async run(ctx: RunContext): Promise<never> {
    const startup = await this.startups.next(ctx.signal);
    if (!startup.run) return this.standDown(ctx, startup);
    const service = this.consensus(ctx, startup);
    const consensus = await this.untilRunning(service, ctx.signal);
    const credentials =
      startup.credentials ?? (await this.finishBootstrap(ctx, startup, consensus));
    await this.startCurator(ctx, startup, consensus, credentials);
    ctx.healthy();
    return Promise.race([
      this.untilFlip(true, ctx.signal),
      this.untilConsensusStops(service, ctx.signal),
    ]);
  }

  /**
   * No control plane: none is published, and once etcd has confirmed that
   * this node's member is gone (or there never was one), no stale etcd data
   * and no unlock key stay. See the module comment.
   */
  private async standDown(ctx: RunContext, startup: StandDown): Promise<never> {
    this.values.localControlPlane.set(undefined);
    if (await hasMemberData(this.config.storage)) {
      if (!startup.credentials) {
        // Only a node whose bootstrap has not finished lacks them, and it runs a control plane.
        throw new ControlPlaneInputError("etcd data on disk, but no node credentials to start it");
      }
      // etcd decides, from this very data: started as the member it was.
      const service = this.consensus(ctx, { credentials: startup.credentials });
      ctx.healthy();
      // Following the roles meanwhile; ended once etcd decided, to follow them again below.
      const lingering = new AbortController();
      const flip = this.untilFlip(false, AbortSignal.any([ctx.signal, lingering.signal]));
      try {
        await Promise.race([flip, this.lingerUntilRemoved(ctx, service)]);
      } finally {
        lingering.abort();
        await flip.catch(() => undefined);
      }
      // Removed: etcd has exited and will not be started on this data again.
      await rm(memberDataPath(this.config.storage), { recursive: true, force: true });
      ctx.logger.info(
        "etcd reported this member's removal from the cluster: removed its etcd data",
      );
      await this.dropUnlockKey(ctx, this.startups.secrets);
      return this.untilFlip(false, ctx.signal);
    }
    // What a join etcd gave up may have left (member-data.ts): no member's data.
    await rm(memberDataPath(this.config.storage), { recursive: true, force: true });
    await this.dropUnlockKey(ctx, this.startups.secrets);
    ctx.healthy();
    return this.untilFlip(false, ctx.signal);
  }

  /**
   * Runs this node's member from its data until etcd reports it removed.
   * While etcd counts it as a member, it keeps running: its vote keeps the
   * cluster's quorum, whatever this node's roles say.
   */
  private async lingerUntilRemoved(ctx: RunContext, service: ConsensusService): Promise<void> {
    const status = await waitFor(
      service.status,
      (s) => s.state === "running" || s.state === "removed",
      ctx.signal,
    );
    if (status.state === "running") {
      const member = await status.confirmMember().catch(() => undefined);
      ctx.logger.warn(
        member === true
          ? "not a consensus member by its roles, but etcd still counts this node as a member: running it until etcd removes it (its data and unlock key stay)"
          : "not a consensus member by its roles; etcd has not said it removed this member: running it until it does (its data and unlock key stay)",
      );
    }
    await waitFor(service.status, (s) => s.state === "removed", ctx.signal);
  }

  /** Removes the cluster unlock key from the sealed configuration, if it holds one. */
  private async dropUnlockKey(
    ctx: RunContext,
    enrolment: EnrolmentSecrets | undefined,
  ): Promise<void> {
    if (!enrolment || enrolment.sealed.clusterUnlockKey.length === 0) return;
    await this.reseal(enrolment, { clusterUnlockKey: Buffer.alloc(0) });
    ctx.logger.info(
      "not a consensus member: cluster unlock key removed from the sealed configuration",
    );
  }

  /** Starts this node's consensus member as the child "consensus", as `startup` says. */
  private consensus(
    ctx: RunContext,
    startup: Pick<RunStartup, "bootstrap" | "credentials" | "join">,
  ): ConsensusService {
    const privateKey = startup.bootstrap?.nodePrivateKey ?? startup.credentials?.privateKey;
    if (!privateKey) throw new ControlPlaneInputError("neither bootstrap data nor credentials");
    const service = new ConsensusService({
      nodeId: nodeIdFromPublicKey(publicKeyFromPrivateKey(privateKey)),
      nodePrivateKey: privateKey,
      storage: this.config.storage,
      peer: { host: this.config.host, port: this.consensusPort },
      bootstrap: startup.bootstrap !== undefined && startup.join === undefined,
      join: startup.join,
      timings: this.config.timings,
      etcdBinary: this.config.etcdBinary,
      autopromoteIntervalMs: this.config.autopromoteIntervalMs,
    });
    ctx.run("consensus", service.run);
    return service;
  }

  /** The member once it serves; ConsensusRemovedError when etcd says it was removed instead. */
  private async untilRunning(
    service: ConsensusService,
    signal: AbortSignal,
  ): Promise<RunningConsensus> {
    const status = await waitFor(
      service.status,
      (s) => s.state === "running" || s.state === "removed",
      signal,
    );
    if (status.state !== "running") throw new ConsensusRemovedError();
    return status;
  }

  /**
   * The last step of a bootstrap: as the only curator candidate, create the
   * cluster's CA and first records (idempotent, so a crash half-way is
   * retried safely), then keep the node's credentials.
   */
  private async finishBootstrap(
    ctx: RunContext,
    startup: RunStartup,
    consensus: RunningConsensus,
  ): Promise<NodeCredentials> {
    const bootstrap = startup.bootstrap;
    if (!bootstrap) throw new ControlPlaneInputError("no credentials and no bootstrap data");
    const publicKey = publicKeyFromPrivateKey(bootstrap.nodePrivateKey);
    const nodeId = nodeIdFromPublicKey(publicKey);
    const result = await bootstrapCluster(
      consensus.client.sub("curator"),
      { nodeId, host: this.config.host, port: this.curatorPort },
      {
        nodeId,
        nodePublicKey: publicKey,
        joinPublicKey: bootstrap.joinPublicKey,
        clusterUnlockKey: startup.enrolment.clusterUnlockKey,
        ownerPublicKey: bootstrap.ownerPublicKey,
        configuration: common.ClusterConfiguration.fromPartial({
          ...bootstrap.configuration,
          storagePolicy: startup.enrolment.sealed.storagePolicy,
        }),
        ipAddresses: [this.config.host],
        labels: bootstrap.labels,
      },
      this.config.leaderTtlSeconds,
    );
    const credentials: NodeCredentials = {
      nodeId,
      privateKey: bootstrap.nodePrivateKey,
      certificate: result.nodeCertificate,
      caCertificate: result.caCertificate,
    };
    await saveCredentials(this.config.storage.data.node.credentials, credentials);
    // The roles the bootstrap gave this node, kept like rolefetch keeps
    // them: a restart must find its control plane role before any curator runs.
    await this.config.storage.data.node.roles.write({
      consensusMember: {
        peers: [],
        caCertificate: Buffer.alloc(0),
        peerCertificate: Buffer.alloc(0),
        peerCrl: Buffer.alloc(0),
      },
      kubernetesController: {},
    });
    ctx.logger.info(
      result.created ? "cluster bootstrapped" : "cluster bootstrap had already finished",
    );
    return credentials;
  }

  private async startCurator(
    ctx: RunContext,
    startup: RunStartup,
    consensus: RunningConsensus,
    credentials: NodeCredentials,
  ): Promise<void> {
    await this.reseal(startup.enrolment, {
      clusterCa: Buffer.from(credentials.caCertificate),
      clusterUnlockKey: Buffer.from(startup.enrolment.clusterUnlockKey),
    });
    const curator = new Curator({
      nodeId: credentials.nodeId,
      tls: credentialsPem(credentials),
      host: this.config.host,
      port: this.curatorPort,
      consensus,
      leaderTtlSeconds: this.config.leaderTtlSeconds,
      heartbeatTimeoutMs: this.config.heartbeatTimeoutMs,
      reconcileIntervalMs: this.config.reconcileIntervalMs,
    });
    ctx.run("curator", curator.run);
    if (startup.bootstrap && startup.credentials === undefined) {
      // The bootstrap made the credentials: now the node can reach its cluster.
      this.values.curatorConnection.set({
        credentials,
        connection: nodeCuratorConnection(
          [{ host: this.config.host, port: this.curatorPort, nodeId: credentials.nodeId }],
          credentials,
        ),
      });
      // Done: from now on this node runs a control plane for its roles like
      // any other, also when a later run of this launcher decides afresh.
      this.values.bootstrapData.set(undefined);
    }
    this.values.localControlPlane.set({ consensus, curator, curatorPort: this.curatorPort });
  }

  /** Fails once "should run a control plane" differs from `running`. */
  private async untilFlip(running: boolean, signal: AbortSignal): Promise<never> {
    for (;;) {
      const startup = await this.startups.next(signal);
      if (startup.run !== running) throw new RolesChangedError("control plane", startup.run);
    }
  }

  /** Fails when the consensus member stops (or is removed) under the curator. */
  private async untilConsensusStops(
    service: ConsensusService,
    signal: AbortSignal,
  ): Promise<never> {
    const status: ConsensusStatus = await waitFor(
      service.status,
      (s) => s.state !== "running",
      signal,
    );
    throw status.state === "removed" ? new ConsensusRemovedError() : new ConsensusStoppedError();
  }

  /** Rewrites the sealed configuration with `change`, unless it already says so. */
  private async reseal(
    enrolment: EnrolmentSecrets,
    change: Partial<priv.SealedConfiguration>,
  ): Promise<void> {
    const next = priv.SealedConfiguration.fromPartial({ ...enrolment.sealed, ...change });
    const bytes = priv.SealedConfiguration.encode(next).finish();
    if (Buffer.from(bytes).equals(priv.SealedConfiguration.encode(enrolment.sealed).finish())) {
      return;
    }
    await sealConfiguration(this.config.storage.esp.metropolis.sealedConfiguration, bytes, {
      machineKeyPath: this.config.machineKeyPath,
      overwrite: true,
    });
    enrolment.sealed = next;
  }

  close(): void {
    this.startups.close();
  }
}

/**
 * The control plane worker: see the module comment. Publishes
 * `localControlPlane` while it serves, and `curatorConnection` after it
 * bootstrapped the cluster.
 */
export function controlPlaneWorker(values: RoleserveValues, config: ControlPlaneConfig): Runnable {
  return async (ctx) => {
    const launcher = new ControlPlaneLauncher(values, config);
    try {
      await launcher.run(ctx);
    } finally {
      values.localControlPlane.set(undefined);
      launcher.close();
    }
  };
}
