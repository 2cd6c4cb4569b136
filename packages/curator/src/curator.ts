/**
 * The curator: the cluster's control plane, run on every consensus member.
 * One curator leads and serves the cluster's APIs; the others follow and
 * only tell clients where the leader is.
 *
 *   campaigning ──▶ following (CuratorLocal; republishes the leader; the rest "not the leader")
 *                      └──now leads──▶ leading (Curator, Management, AAA, CuratorLocal)
 *                                         └──lease deadline passed──▶ steppingDown.leaseUnconfirmed ─┐
 *   candidacy lost (either role) ──▶ steppingDown.candidacyLost ─────────────────────────────────┴─▶ CandidacyLostError:
 *                                                                          the supervisor restarts the run
 *
 * The order is the leadership machine's (curator-machine.ts, XState, run
 * through the supervisor's machineRunnable: its state is on the curator's
 * node of the supervision tree); what each state does is here. The
 * supervisor's restart is the way back to campaigning, as in Monogon's
 * curator and the control plane launcher (roleserve's controlplane.ts): a
 * run campaigns once, follows until it leads, leads until its candidacy is
 * lost or its lease deadline passes (lease-deadline.ts), and then fails;
 * its end resigns the candidacy, forgets the leader and has shut its
 * listener down, so the next run starts from nothing.
 *
 * Guarantees: the run is healthy once it campaigned (it follows, asking
 * etcd who leads, or leads); a leader announces itself (`leader`) only once it serves, so
 * clients told of it find it answering; a follower keeps its listener across
 * changes of the election until it leads; when it leads, the leader's
 * server takes over the same listening socket once the follower's server has
 * shut down (connections arriving in between wait for it: listener.ts).
 */
import type { ServerCredentials, ServiceDefinition } from "@grpc/grpc-js";
import { memberClient } from "@metropolis/consensus";
import { MemoryValue } from "@metropolis/event";
import { decodePem } from "@metropolis/pki";
import { access as accessProto, api, curator as curatorProto } from "@metropolis/proto";
import type { RunContext, Runnable } from "@metropolis/supervisor";
import { logProgress } from "@metropolis/supervisor/node-progress";
import { machineRunnable } from "@metropolis/supervisor/xstate";
import { aaaServer } from "./aaa-service";
import { curatorServerCredentials, type TlsPem } from "./credentials";
import { curatorLocalServer } from "./curator-local";
import { leadershipMachine, type LeadershipSteps } from "./curator-machine";
import { curatorServer } from "./curator-service";
import { CandidacyLostError } from "./errors";
import { ClockSamples } from "./clock-samples";
import { ConsensusViews } from "./consensus-views";
import { HeartbeatTracker } from "./heartbeat-tracker";
import { IdentityCache, identifier } from "./identity";
import { clusterCa, type LeaderContext, type RunningConsensus } from "./leader-context";
import { campaign, type Candidacy, type CuratorEndpoint } from "./leadership";
import type { ServiceEntry } from "./call-router";
import { Listener } from "./listener";
import { managementServer, managementService } from "./management-service";
import { accessServer } from "./access-service";
import { NodeRecordMirror } from "./node-record-mirror";
import { notTheLeader } from "./not-the-leader";
import { readConfiguration } from "./management-configuration";
import { defaultReconcileIntervalMs, membershipReconciler } from "./membership-reconciler";
import { defaultWipeAcknowledgementTimeoutMs } from "./management-decommission";
import { followStoredRevocations, Revocations } from "./revocations";

/** Default port of the curator. */
export const defaultCuratorPort = 7835;

/** What a curator is run with. */
export interface CuratorConfig {
  /** This node's ID. */
  nodeId: string;
  /** This node's TLS material: its node certificate and key, and the cluster CA. */
  tls: TlsPem;
  /** The address the curator listens on and announces to clients. */
  host: string;
  /** Default 7835. */
  port?: number;
  /** This node's running consensus; the curator keeps its state under `namespaced:curator/`. */
  consensus: RunningConsensus;
  /**
   * TTL of the election lease, in seconds.
   * @default {@link defaultLeaderTtlSeconds}
   */
  leaderTtlSeconds?: number;
  /** Heartbeat timeout. Default 10 s. */
  heartbeatTimeoutMs?: number;
  /** The services the leader serves besides CuratorLocal. Default: {@link clusterServices}. */
  leaderServices?: (ctx: LeaderContext) => ServiceEntry[];
  /**
   * The definitions of `leaderServices`' services: a follower answers their
   * calls "not the leader" (UNAVAILABLE, naming the leader).
   * @default {@link clusterServiceDefinitions} when `leaderServices` is not set, else none
   */
  leaderServiceDefinitions?: readonly ServiceDefinition[];
  /** Interval of the leader's etcd membership reconciliation. Default 5000 ms. */
  reconcileIntervalMs?: number;
  /**
   * How long the leader's DecommissionNode with `wipe` waits for the node to
   * acknowledge the wipe on its heartbeat (recorded in its record) before it
   * revokes the node's certificate all the same and answers that the wipe
   * was not acknowledged.
   * @default {@link defaultWipeAcknowledgementTimeoutMs} (30 s)
   */
  wipeAcknowledgementTimeoutMs?: number;
}

/** The definitions of {@link clusterServices}' services. */
export const clusterServiceDefinitions: readonly ServiceDefinition[] = [
  curatorProto.CuratorService,
  managementService,
  api.AAAService,
  accessProto.AccessService,
];

/** The services a leading curator serves besides CuratorLocal: Curator, Management and AAA. */
export function clusterServices(ctx: LeaderContext): ServiceEntry[] {
  return [
    [curatorProto.CuratorService, curatorServer(ctx)],
    [managementService, managementServer(ctx)],
    [api.AAAService, aaaServer(ctx)],
    [accessProto.AccessService, accessServer(ctx)],
  ];
}

/** The methods of CuratorLocal: served by every curator, whether it leads or not. */
const localPaths: ReadonlySet<string> = new Set<string>(
  Object.values(curatorProto.CuratorLocalService).map((method) => method.path),
);

/** The election lease's TTL, in seconds, unless the configuration says otherwise. */
export const defaultLeaderTtlSeconds = 10;

/** How long a curator stepping down waits for etcd to revoke its lease; the lease expires by itself. */
export const stepDownTimeoutMs = 1000;

/** One run of a curator: one listener and, once it campaigned, one candidacy. */
interface Run {
  ctx: RunContext;
  listener: Listener;
  candidacy: Candidacy | undefined;
  /** The machine's steps still running: the run's end waits for them. */
  steps: Set<Promise<unknown>>;
}

/** A curator of this node; supervise `run`, read `leader`. */
export class Curator {
  /** The leader as this curator sees it; undefined while campaigning. */
  readonly leader = new MemoryValue<CuratorEndpoint | undefined>(undefined);
  /** What `leader` was last set to: the hint of a "not the leader" answer. */
  private knownLeader: CuratorEndpoint | undefined;
  private readonly self: CuratorEndpoint;
  private readonly credentials: ServerCredentials;
  /** Its callers' classifications, across its runs and leaderships (identity.ts). */
  private readonly identities: IdentityCache;

  constructor(private readonly config: CuratorConfig) {
    this.self = {
      nodeId: config.nodeId,
      host: config.host,
      port: config.port ?? defaultCuratorPort,
    };
    this.credentials = curatorServerCredentials(config.tls);
    this.identities = new IdentityCache(decodePem(config.tls.ca, "CERTIFICATE"));
  }

  /**
   * The runnable to supervise, e.g. `ctx.run("curator", curator.run)`: the
   * leadership machine (curator-machine.ts) of one candidacy. It returns
   * when its signal aborts and fails with CandidacyLostError when its
   * candidacy ends under it; its end resigns the candidacy, forgets the
   * leader and has shut its listener down, so the next run starts from nothing.
   */
  readonly run: Runnable = async (ctx) => {
    this.setLeader(undefined);
    // The election lease is renewed over a connection of its own: on the
    // shared one its keepalives queued behind the leader's own traffic while
    // thousands of nodes came back after a failover, and a busy new leader
    // lost its lease (bench:scale at 5,000 nodes; the curator README's cost model).
    const election = memberClient(this.config.consensus.clientSocket, { dedicated: true });
    const listener = new Listener(
      `${this.self.host}:${this.self.port}`,
      this.credentials,
      ctx.logger,
    );
    const run: Run = { ctx, listener, candidacy: undefined, steps: new Set() };
    try {
      await machineRunnable(leadershipMachine, {
        input: { steps: this.steps(run, election) },
      })(ctx);
    } finally {
      this.setLeader(undefined);
      // The machine is stopped; what its states started ends with their signals.
      await Promise.allSettled(run.steps);
      await Promise.all([run.candidacy?.resign(stepDownTimeoutMs), listener.close()]);
      election.close();
    }
  };

  /** The steps of the leadership machine for `run`, each tracked until it settles. */
  private steps(run: Run, election: ReturnType<typeof memberClient>): LeadershipSteps {
    const tracked = <T>(step: Promise<T>): Promise<T> => {
      run.steps.add(step);
      void step.then(
        () => run.steps.delete(step),
        () => run.steps.delete(step),
      );
      return step;
    };
    const candidacy = (): Candidacy => {
      if (!run.candidacy)
        throw new Error("curator: a step that needs a candidacy ran before the campaign");
      return run.candidacy;
    };
    return {
      campaign: () => tracked(this.campaign(run, election).then((c) => c.deadline)),
      follow: (signal) => tracked(this.follow(run, candidacy(), signal)),
      lead: (signal) => tracked(this.lead(run, candidacy(), signal)),
      standBy: (signal) =>
        tracked(
          run.listener.serve([this.localService(run.ctx, signal)], signal, "candidate", undefined, {
            unserved: this.leaderDefinitions,
            notServed: (path) => notTheLeader(path, "this curator is stepping down", undefined),
          }),
        ),
      stepDown: () => tracked(this.stepDown(candidacy())),
    };
  }

  /** Enters the election, with the lease renewed over `election`. */
  private async campaign(run: Run, election: ReturnType<typeof memberClient>): Promise<Candidacy> {
    const { ctx } = run;
    const candidacy = await campaign(
      this.kv,
      this.self,
      this.config.leaderTtlSeconds ?? defaultLeaderTtlSeconds,
      {
        leaseKv: this.config.consensus.client.over(election).sub("curator").kv,
      },
    );
    run.candidacy = candidacy;
    candidacy.onRenewalTrouble((trouble) =>
      ctx.logger.warn(
        trouble.kind === "slow"
          ? `election lease renewal answered after ${trouble.tookMs} ms`
          : `election lease keepalive failed ${trouble.sinceRenewedMs} ms after the last renewal: ${trouble.error.message}`,
      ),
    );
    ctx.logger.info(`campaigning with election key ${candidacy.key}`);
    return candidacy;
  }

  /**
   * No longer names itself (or anyone) leader, and resigns `candidacy`,
   * waiting at most {@link stepDownTimeoutMs} for etcd: cut off from it,
   * the lease expires by itself.
   */
  private async stepDown(candidacy: Candidacy): Promise<void> {
    this.setLeader(undefined);
    await candidacy.resign(stepDownTimeoutMs);
  }

  /** The leader's services whose calls a curator that does not lead answers "not the leader". */
  private get leaderDefinitions(): readonly ServiceDefinition[] {
    return (
      this.config.leaderServiceDefinitions ??
      (this.config.leaderServices ? [] : clusterServiceDefinitions)
    );
  }

  private setLeader(leader: CuratorEndpoint | undefined): void {
    this.knownLeader = leader;
    this.leader.set(leader);
  }

  private get kv() {
    return this.config.consensus.client.sub("curator").kv;
  }

  private get secrets() {
    return this.config.consensus.client.sub("curator").secrets;
  }

  /**
   * Serves CuratorLocal and follows the election, republishing the leader on
   * every change, until this curator leads (resolves) or `signal` aborts
   * (resolves too: the machine that asked has moved on). The listener stays
   * up across changes of the election (stale keys of a cold start expiring,
   * candidates arriving): clients reaching it mid-change would otherwise
   * find the port closed.
   *
   * @throws CandidacyLostError when the candidacy ends first.
   */
  private async follow(
    { ctx, listener }: Run,
    candidacy: Candidacy,
    given: AbortSignal,
  ): Promise<void> {
    const following = new AbortController();
    const signal = AbortSignal.any([given, following.signal]);
    const serving = listener.serve(
      [this.localService(ctx, signal)],
      signal,
      "follower",
      undefined,
      {
        unserved: this.leaderDefinitions,
        notServed: (path) => notTheLeader(path, "this curator follows", this.knownLeader),
      },
    );
    const leading = candidacy.followUntilLeading(signal, (leader) => {
      // A read answered after following ended must not overwrite what a later state set.
      if (!signal.aborted) this.setLeader(leader);
    });
    try {
      const outcome = await Promise.race([
        leading.then(() => "leads" as const),
        candidacy.lost,
        serving.then(() => "stopped" as const),
      ]);
      if (outcome instanceof Error) throw new CandidacyLostError("follower", outcome);
    } catch (e) {
      if (given.aborted) return;
      throw e;
    } finally {
      following.abort();
      // Both settle once aborted; whichever failed first was thrown by the race.
      await Promise.allSettled([serving, leading]);
    }
  }

  /**
   * Serves the cluster's APIs, with the leader's membership reconciler and
   * the CA's revocations followed, until the candidacy ends or `given`
   * aborts (the machine left leading: its lease deadline passed, or the run
   * ends); returns once the listener has shut down and the reconciler has
   * stopped.
   *
   * @throws CandidacyLostError when the candidacy ended.
   */
  private async lead(
    { ctx, listener }: Run,
    candidacy: Candidacy,
    given: AbortSignal,
  ): Promise<void> {
    const leading = new AbortController();
    const signal = AbortSignal.any([given, leading.signal]);
    let lost: Error | undefined;
    void candidacy.lost.then((why) => {
      // A loss heard after this leadership ended (a guarded write of the
      // ended run answered late, say) is no news, and must not unset the
      // leader a later run has learned: that curator then named no leader
      // to its GetCurrentLeader callers until the election next changed
      // (seen in e2e partition-faults, 1 run in 4, as a curator that
      // answered nothing for over 30 s after a bridge partition healed).
      if (signal.aborted) {
        ctx.logger.info(`candidacy lost after its leadership ended (ignored): ${why.message}`);
        return;
      }
      lost = why;
      // At once, before the listener winds down: no one is told it leads any more.
      this.setLeader(undefined);
      leading.abort();
    });
    const caDer = decodePem(this.config.tls.ca, "CERTIFICATE");
    const ca = clusterCa(this.secrets);
    const revocations = new Revocations(caDer);
    let reconciling: Promise<void> | undefined;
    const leadership = candidacy.leadership();
    const nodes = new NodeRecordMirror(this.kv, leadership, ctx.logger);
    try {
      await followStoredRevocations(this.kv, ca, revocations, signal, (e) =>
        ctx.logger.error(`following the cluster CA's revocation list: ${String(e)}`),
      );
      const leaderCtx: LeaderContext = {
        self: this.self,
        kv: this.kv,
        secrets: this.secrets,
        leadership,
        nodes,
        consensus: this.config.consensus,
        clusterCa: ca,
        heartbeats: new HeartbeatTracker(this.config.heartbeatTimeoutMs),
        wipeAcknowledgementTimeoutMs:
          this.config.wipeAcknowledgementTimeoutMs ?? defaultWipeAcknowledgementTimeoutMs,
        clocks: new ClockSamples(),
        consensusViews: new ConsensusViews(),
        logger: ctx.logger,
        revocations,
        identify: identifier(this.identities, revocations),
      };
      // The cluster's heartbeat timeout, if its configuration sets one.
      leaderCtx.heartbeats.configure((await readConfiguration(leaderCtx)).config);
      // Read before the nodes come: a new leader's first calls are every node's.
      nodes.prime();
      ctx.logger.info("elected leader");
      const intervalMs = this.config.reconcileIntervalMs ?? defaultReconcileIntervalMs;
      reconciling = membershipReconciler(leaderCtx, intervalMs, signal);
      await listener.serve(
        [
          ...(this.config.leaderServices ?? clusterServices)(leaderCtx),
          this.localService(ctx, signal),
        ],
        signal,
        "leader",
        () => {
          this.setLeader(this.self);
          logProgress(ctx.logger, "serving the cluster's APIs as the leader", {
            event: "curator.leading",
            nodeId: this.self.nodeId,
            address: `${this.self.host}:${this.self.port}`,
          });
        },
        {
          // Checked as each call arrives: the deadline may pass before its timer runs.
          admit: (path) =>
            leadership.serving || localPaths.has(path)
              ? undefined
              : notTheLeader(path, "this curator's election lease is unconfirmed", undefined),
        },
      );
    } catch (e) {
      // Ended by the candidacy's loss (a wait given up with `signal`, say): say so.
      if (lost && !given.aborted) throw new CandidacyLostError("leader", lost);
      throw e;
    } finally {
      // Also when serving failed: the revocations and the reconciler stop with the listener.
      leading.abort();
      await reconciling;
      await nodes.close();
    }
    if (lost && !given.aborted) throw new CandidacyLostError("leader", lost);
  }

  private localService(ctx: RunContext, signal: AbortSignal): ServiceEntry {
    return [
      curatorProto.CuratorLocalService,
      curatorLocalServer({
        nodeId: this.self.nodeId,
        leader: this.leader,
        caCertificate: this.config.tls.ca,
        logger: ctx.logger,
        signal,
        // Who asks while following is who calls when leading (identity.ts).
        onCaller: (call) => void this.identities.learn(call),
      }),
    ];
  }
}
