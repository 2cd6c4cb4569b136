/**
 * The control plane launcher: runs this node's consensus member and curator
 * while the node should run a control plane (see controlplane-startup.ts).
 *
 *   waitingForRoles ──run──▶ startingConsensus ──▶ bootstrapping? ──▶ startingCurator ──▶ running (healthy) … roles flip / etcd stops ──▶ fail
 *        └──no run──▶ standingDown (below) ──────────────────────────────────────────────▶ notMember (healthy) … roles flip ──────────▶ fail
 *
 * The order is the control plane machine's (controlplane-machine.ts,
 * XState, run through the supervisor's machineRunnable: its state is on the
 * launcher's node of the supervision tree, `root.roleserver.controlplane`);
 * what each state does is here, in the launcher's steps. A run goes one way
 * and never adjusts a running control plane. When "should run" flips, or
 * etcd stops under the curator, it fails with a typed error, the supervisor
 * cancels its children (stopping etcd and the curator) and starts it again,
 * and the new run decides afresh — seed 004's launcher pattern, where the
 * supervisor's restart is the retry.
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
  checkMemberData,
  ConsensusService,
  defaultPeerPort,
  hasMemberData,
  memberDataPath,
  wipeMemberData,
  type ConsensusStatus,
  type EtcdTimings,
  type MemberDataDecision,
} from "@metropolis/consensus";
import {
  bootstrapCluster,
  Curator,
  defaultCuratorPort,
  defaultLeaderTtlSeconds,
  type RunningConsensus,
} from "@metropolis/curator";
import { waitFor } from "@metropolis/event";
import { sealConfiguration, type NodeRoot } from "@metropolis/localstorage";
import { nodeIdFromPublicKey, publicKeyFromPrivateKey } from "@metropolis/pki";
import { common, priv } from "@metropolis/proto";
import { abortable, abortableSleep, type RunContext, type Runnable } from "@metropolis/supervisor";
import { machineRunnable } from "@metropolis/supervisor/xstate";
import {
  controlPlaneMachine,
  type ControlPlaneDecision,
  type ControlPlaneSteps,
  type MemberRole,
} from "./controlplane-machine";
import { StartupWatcher, type ControlPlaneStartup } from "./controlplane-startup";
import { keepFirstNodeRoles } from "./first-node-roles";
import {
  ConsensusRemovedError,
  ConsensusStoppedError,
  ControlPlaneInputError,
  ControlPlaneStepError,
  RolesChangedError,
  StaleMemberDataError,
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

/** How often a running learner asks its member whether it votes yet. */
const voterPollMs = 1000;

/**
 * How often a member started from its data, and not serving yet, asks the
 * cluster it is told to join whether that data is stale (see startConsensus).
 */
const staleCheckMs = 2000;

/**
 * One run of the launcher: the steps of the control plane machine
 * (controlplane-machine.ts), and what they produce. See the module comment.
 */
class ControlPlaneLauncher {
  private readonly startups: StartupWatcher;
  /** The steps still running: the run's end waits for them. */
  private readonly pending = new Set<Promise<unknown>>();
  /** Aborted when the run ends: what its steps still wait for ends then. */
  private readonly ended = new AbortController();
  /** The run's startup, once decided. */
  private startup: ControlPlaneStartup | undefined;
  /** This node's member, once started (running the control plane, or lingering). */
  private service: ConsensusService | undefined;
  /** The member, once it serves. */
  private running: RunningConsensus | undefined;
  /** The credentials the bootstrap made, once it did. */
  private bootstrapped: NodeCredentials | undefined;
  /** What the last check of the member's data said, so that a repeated answer is logged once. */
  private reported: string | undefined;

  constructor(
    private readonly values: RoleserveValues,
    private readonly config: ControlPlaneConfig,
    private readonly ctx: RunContext,
  ) {
    this.startups = new StartupWatcher(values);
  }

  private get consensusPort(): number {
    return this.config.consensusPort ?? defaultPeerPort;
  }

  private get curatorPort(): number {
    return this.config.curatorPort ?? defaultCuratorPort;
  }

  /** The steps of the machine for this run, each tracked until it settles. */
  steps(): ControlPlaneSteps {
    const tracked = <T>(step: Promise<T>): Promise<T> => {
      this.pending.add(step);
      void step.then(
        () => this.pending.delete(step),
        () => this.pending.delete(step),
      );
      return step;
    };
    const until = (signal: AbortSignal) => AbortSignal.any([signal, this.ended.signal]);
    return {
      decide: (signal) => tracked(this.decide(until(signal))),
      startConsensus: (signal) => tracked(this.startConsensus(until(signal))),
      bootstrap: () => tracked(this.bootstrap()),
      startCurator: (signal) => tracked(this.startCurator(until(signal))),
      untilVoter: (signal) => tracked(this.untilVoter(until(signal))),
      untilConsensusStops: (signal) => tracked(this.untilConsensusStops(until(signal))),
      untilRolesChange: (running, signal) => tracked(this.untilFlip(running, until(signal))),
      standDown: () => tracked(this.standDown()),
      untilRemoved: (signal) => tracked(this.lingerUntilRemoved(until(signal))),
      removeMemberData: () => tracked(this.removeMemberData()),
    };
  }

  /** The first startup of the run, as the machine's decision. */
  private async decide(signal: AbortSignal): Promise<ControlPlaneDecision> {
    const startup = await this.startups.next(signal);
    this.startup = startup;
    if (!startup.run) return "notMember";
    return startup.credentials ? "member" : "bootstrap";
  }

  /**
   * Starts the member as the startup says, until it serves.
   *
   * With etcd data on disk and join parameters in the consensus role, the
   * data may be a former member's of a cluster since restored from a backup
   * (a new etcd cluster): it is checked against the cluster to join first
   * (@metropolis/consensus `checkMemberData`), and removed only when that
   * cluster proves it stale — then the member joins as a learner. Anything
   * less keeps the data, and the member starts from it as before (a whole
   * cluster powered on again has no peer to answer yet). While a member
   * started from its data does not serve, the newest startup is checked
   * again every {@link staleCheckMs}: roles that no longer give the consensus
   * role fail the run (RolesChangedError), as does a proof that the data is
   * stale (StaleMemberDataError, so that the next run, etcd stopped, removes
   * it and joins).
   */
  private async startConsensus(signal: AbortSignal): Promise<void> {
    const startup = this.runStartup("startConsensus");
    let fromData = await hasMemberData(this.config.storage);
    if (fromData && startup.join) {
      const decision = await this.checkMemberData(startup);
      if (decision.action === "wipe") {
        await wipeMemberData(this.config.storage);
        fromData = false;
        this.ctx.logger.warn(decision.reason);
      } else {
        this.reported = decision.reason;
        this.ctx.logger.info(decision.reason);
      }
    }
    const service = this.consensus(startup);
    this.service = service;
    if (!fromData) {
      this.running = await this.untilRunning(service, signal);
      return;
    }
    const started = new AbortController();
    const both = AbortSignal.any([signal, started.signal]);
    try {
      this.running = await Promise.race([
        this.untilRunning(service, both),
        this.untilStale(startup, both),
      ]);
    } finally {
      started.abort();
    }
  }

  /** checkMemberData for `startup`'s join, as this node (see startConsensus). */
  private checkMemberData(startup: RunStartup): Promise<MemberDataDecision> {
    const join = startup.join;
    const privateKey = startup.credentials?.privateKey ?? startup.bootstrap?.nodePrivateKey;
    if (!join || !privateKey) {
      return Promise.resolve({
        action: "retry",
        reason: "no join parameters to check the data against",
      });
    }
    return checkMemberData({
      storage: this.config.storage,
      join,
      nodePrivateKey: privateKey,
      ownPeerUrl: `https://${this.config.host}:${this.consensusPort}`,
      localAddress: this.config.host,
    });
  }

  /**
   * While the member started from its data does not serve: every
   * {@link staleCheckMs}, or at once when the startup changes, fails the run
   * when the roles no longer give the consensus role, or when the cluster to
   * join proves the data stale.
   */
  private async untilStale(first: RunStartup, signal: AbortSignal): Promise<never> {
    let startup: ControlPlaneStartup = first;
    for (;;) {
      const wait = AbortSignal.any([signal, AbortSignal.timeout(staleCheckMs)]);
      const next = await this.startups.next(wait).catch((e: unknown) => {
        if (signal.aborted) throw e;
        return undefined;
      });
      if (next) startup = next;
      if (!startup.run) throw new RolesChangedError("control plane", false);
      if (!startup.join) continue;
      const decision = await this.checkMemberData(startup);
      if (signal.aborted) throw signal.reason;
      if (decision.action === "wipe") throw new StaleMemberDataError(decision.reason);
      if (decision.reason !== this.reported) {
        this.reported = decision.reason;
        this.ctx.logger.info(decision.reason);
      }
    }
  }

  /** The bootstrap's last step (finishBootstrap), keeping the credentials it made. */
  private async bootstrap(): Promise<void> {
    this.bootstrapped = await this.finishBootstrap(
      this.runStartup("bootstrap"),
      this.runningConsensus("bootstrap"),
    );
  }

  /** Whether the member is a learner: one that does not answer is not known to vote yet. */
  private async roleOf(running: RunningConsensus, signal: AbortSignal): Promise<MemberRole> {
    const status = await abortable(running.raftStatus(), signal).catch((e: unknown) => {
      if (signal.aborted) throw e;
      return undefined;
    });
    return status && !status.isLearner ? "voter" : "learner";
  }

  /** Asks the member every {@link voterPollMs} until it votes (the cluster promoted it). */
  private async untilVoter(signal: AbortSignal): Promise<void> {
    const running = this.runningConsensus("untilVoter");
    while ((await this.roleOf(running, signal)) === "learner") {
      await abortableSleep(voterPollMs, signal);
    }
    this.ctx.logger.info("this node's etcd member is a voter");
  }

  /**
   * No control plane: none is published. With etcd data on disk, its member
   * is started from that data (see the module comment); the machine then
   * lingers until etcd removes it, and removes the data only then.
   */
  private async standDown(): Promise<boolean> {
    this.values.localControlPlane.set(undefined);
    if (!(await hasMemberData(this.config.storage))) return false;
    const credentials = this.startup?.credentials;
    if (!credentials) {
      // Only a node whose bootstrap has not finished lacks them, and it runs a control plane.
      throw new ControlPlaneInputError("etcd data on disk, but no node credentials to start it");
    }
    // etcd decides, from this very data: started as the member it was.
    this.service = this.consensus({ credentials });
    return true;
  }

  /**
   * Removes the member's etcd data and the cluster unlock key: once etcd
   * reported the member removed (it has exited and will not be started on
   * this data again), or when there was no member's data to start.
   */
  private async removeMemberData(): Promise<void> {
    // Without a member: what a join etcd gave up may have left (member-data.ts), no member's data.
    await rm(memberDataPath(this.config.storage), { recursive: true, force: true });
    if (this.service) {
      this.ctx.logger.info(
        "etcd reported this member's removal from the cluster: removed its etcd data",
      );
    }
    await this.dropUnlockKey(this.startups.secrets);
  }

  /**
   * Runs this node's member from its data until etcd reports it removed.
   * While etcd counts it as a member, it keeps running: its vote keeps the
   * cluster's quorum, whatever this node's roles say.
   */
  private async lingerUntilRemoved(signal: AbortSignal): Promise<void> {
    const service = this.member("untilRemoved");
    const status = await waitFor(
      service.status,
      (s) => s.state === "running" || s.state === "removed",
      signal,
    );
    if (status.state === "running") {
      const member = await status.confirmMember().catch(() => undefined);
      this.ctx.logger.warn(
        member === true
          ? "not a consensus member by its roles, but etcd still counts this node as a member: running it until etcd removes it (its data and unlock key stay)"
          : "not a consensus member by its roles; etcd has not said it removed this member: running it until it does (its data and unlock key stay)",
      );
    }
    await waitFor(service.status, (s) => s.state === "removed", signal);
  }

  /** Removes the cluster unlock key from the sealed configuration, if it holds one. */
  private async dropUnlockKey(enrolment: EnrolmentSecrets | undefined): Promise<void> {
    if (!enrolment || enrolment.sealed.clusterUnlockKey.length === 0) return;
    await this.reseal(enrolment, { clusterUnlockKey: Buffer.alloc(0) });
    this.ctx.logger.info(
      "not a consensus member: cluster unlock key removed from the sealed configuration",
    );
  }

  /** Starts this node's consensus member as the child "consensus", as `startup` says. */
  private consensus(
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
    this.ctx.run("consensus", service.run);
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
    await keepFirstNodeRoles(this.config.storage);
    this.ctx.logger.info(
      result.created ? "cluster bootstrapped" : "cluster bootstrap had already finished",
    );
    return credentials;
  }

  /**
   * Keeps the CA and cluster unlock key sealed, starts the curator as the
   * child "curator" and publishes the local control plane (and, after a
   * bootstrap, the node's curator connection); resolves with the member's
   * role, asked meanwhile: the question (etcd's status and metrics, tens of
   * milliseconds) delays neither the curator nor what is published.
   */
  private async startCurator(signal: AbortSignal): Promise<MemberRole> {
    const startup = this.runStartup("startCurator");
    const consensus = this.runningConsensus("startCurator");
    const credentials = startup.credentials ?? this.bootstrapped;
    if (!credentials) throw new ControlPlaneInputError("no credentials and no bootstrap data");
    const role = this.roleOf(consensus, signal);
    // Only awaited once the curator runs; should starting it fail, its outcome is nobody's.
    role.catch(() => undefined);
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
    // A run of the curator ends with its candidacy, and its restart is its
    // next campaign. Failing again and again while cut off from the etcd
    // majority, it had the supervisor's backoff grow to half a minute, and a
    // healed curator (with its CuratorLocal, which nodes ask who leads) stayed
    // down that long (e2e partition-faults, 3 runs in 13): it waits at most a
    // lease TTL, the time a leadership takes to change anyway.
    this.ctx.run("curator", curator.run, {
      backoff: { maxMs: (this.config.leaderTtlSeconds ?? defaultLeaderTtlSeconds) * 1000 },
    });
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
    return role;
  }

  /** Fails once "should run a control plane" differs from `running`. */
  private async untilFlip(running: boolean, signal: AbortSignal): Promise<never> {
    for (;;) {
      const startup = await this.startups.next(signal);
      if (startup.run !== running) throw new RolesChangedError("control plane", startup.run);
    }
  }

  /** Fails when the consensus member stops (or is removed) under the curator. */
  private async untilConsensusStops(signal: AbortSignal): Promise<never> {
    const service = this.member("untilConsensusStops");
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

  /** The startup of a run that runs a control plane. */
  private runStartup(step: string): RunStartup {
    if (!this.startup?.run) throw new ControlPlaneStepError(step, "a startup that runs one");
    return this.startup;
  }

  /** The member that serves. */
  private runningConsensus(step: string): RunningConsensus {
    if (!this.running) throw new ControlPlaneStepError(step, "a member that serves");
    return this.running;
  }

  /** The member started (serving or lingering). */
  private member(step: string): ConsensusService {
    if (!this.service) throw new ControlPlaneStepError(step, "a member started");
    return this.service;
  }

  /**
   * Ends the run: what its steps still wait for is aborted, and the steps
   * that do not wait (writes to disk) are waited for, so that the next run
   * never overlaps them.
   */
  async close(): Promise<void> {
    this.ended.abort();
    await Promise.allSettled(this.pending);
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
    const launcher = new ControlPlaneLauncher(values, config, ctx);
    try {
      await machineRunnable(controlPlaneMachine, { input: { steps: launcher.steps() } })(ctx);
    } finally {
      await launcher.close();
      values.localControlPlane.set(undefined);
    }
  };
}
