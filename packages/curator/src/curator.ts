/**
 * The curator: the cluster's control plane, run on every consensus member.
 * One curator leads and serves the cluster's APIs; the others follow and
 * only tell clients where the leader is.
 *
 *   campaign ──▶ leads? ──no──▶ follower (CuratorLocal; republishes the leader) ──now leads──┐
 *                  └─────yes──────────────────────────────────────────────────────────────▶ leader
 *                                              (Curator, Management, AAA, CuratorLocal)
 *   candidacy lost (either role) ──▶ CandidacyLostError: the supervisor restarts the run
 *
 * One straight run, no state machine: the supervisor's restart is the way
 * back to campaigning, as in Monogon's curator and the control plane
 * launcher (roleserve's controlplane.ts). A run campaigns once, follows
 * until it leads, leads until its candidacy is lost, and then fails; its
 * end resigns the candidacy, forgets the leader and has shut its listener
 * down, so the next run starts from nothing.
 *
 * Guarantees: the run is healthy once it knows the leader (itself or
 * another); a leader announces itself (`leader`) only once it serves, so
 * clients told of it find it answering; a follower keeps its listener across
 * changes of the election until it leads; when it leads, the leader's
 * server takes over the same listening socket once the follower's server has
 * shut down (connections arriving in between wait for it: listener.ts).
 */
import type { ServerCredentials, ServiceDefinition } from "@grpc/grpc-js";
import { memberClient } from "@metropolis/consensus";
import { MemoryValue } from "@metropolis/event";
import { decodePem } from "@metropolis/pki";
import { api, curator as curatorProto } from "@metropolis/proto";
import type { RunContext, Runnable } from "@metropolis/supervisor";
import { logProgress } from "@metropolis/supervisor/node-progress";
import { aaaServer } from "./aaa-service";
import { curatorServerCredentials, type TlsPem } from "./credentials";
import { curatorLocalServer } from "./curator-local";
import { curatorServer } from "./curator-service";
import { CandidacyLostError } from "./errors";
import { HeartbeatTracker } from "./heartbeat-tracker";
import { IdentityCache, identifier } from "./identity";
import { clusterCa, type LeaderContext, type RunningConsensus } from "./leader-context";
import { campaign, type Candidacy, type CuratorEndpoint } from "./leadership";
import type { ServiceEntry } from "./call-router";
import { Listener } from "./listener";
import { managementServer, managementService } from "./management-service";
import { NodeRecordMirror } from "./node-record-mirror";
import { notTheLeader } from "./not-the-leader";
import { readConfiguration } from "./management-configuration";
import { defaultReconcileIntervalMs, membershipReconciler } from "./membership-reconciler";
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
  /** TTL of the election lease, in seconds. Default 10. */
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
}

/** The definitions of {@link clusterServices}' services. */
export const clusterServiceDefinitions: readonly ServiceDefinition[] = [
  curatorProto.CuratorService,
  managementService,
  api.AAAService,
];

/** The services a leading curator serves besides CuratorLocal: Curator, Management and AAA. */
export function clusterServices(ctx: LeaderContext): ServiceEntry[] {
  return [
    [curatorProto.CuratorService, curatorServer(ctx)],
    [managementService, managementServer(ctx)],
    [api.AAAService, aaaServer(ctx)],
  ];
}

/** The methods of CuratorLocal: served by every curator, whether it leads or not. */
const localPaths: ReadonlySet<string> = new Set<string>(
  Object.values(curatorProto.CuratorLocalService).map((method) => method.path),
);

/** One run of a curator: one candidacy and one listener; see the module comment. */
interface Run {
  ctx: RunContext;
  candidacy: Candidacy;
  listener: Listener;
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
   * The runnable to supervise, e.g. `ctx.run("curator", curator.run)`. It
   * returns when its signal aborts and fails with CandidacyLostError when
   * its candidacy ends under it.
   */
  readonly run: Runnable = async (ctx) => {
    this.setLeader(undefined);
    // The election lease is renewed over a connection of its own: on the
    // shared one its keepalives queued behind the leader's own traffic while
    // thousands of nodes came back after a failover, and a busy new leader
    // lost its lease (bench:scale at 5,000 nodes; the curator README's cost model).
    const election = memberClient(this.config.consensus.clientSocket, { dedicated: true });
    let candidacy: Candidacy;
    try {
      candidacy = await campaign(this.kv, this.self, this.config.leaderTtlSeconds ?? 10, {
        leaseKv: this.config.consensus.client.over(election).sub("curator").kv,
      });
    } catch (e) {
      election.close();
      throw e;
    }
    candidacy.onRenewalTrouble((trouble) =>
      ctx.logger.warn(
        trouble.kind === "slow"
          ? `election lease renewal answered after ${trouble.tookMs} ms`
          : `election lease keepalive failed ${trouble.sinceRenewedMs} ms after the last renewal: ${trouble.error.message}`,
      ),
    );
    const listener = new Listener(
      `${this.self.host}:${this.self.port}`,
      this.credentials,
      ctx.logger,
    );
    const run: Run = { ctx, candidacy, listener };
    try {
      if (ctx.signal.aborted) return;
      ctx.logger.info(`campaigning with election key ${candidacy.key}`);
      const { leading, ...leader } = await candidacy.leader();
      ctx.healthy();
      // A leader announces itself once it serves (lead), not before.
      if (!leading) {
        this.setLeader(leader);
        if (!(await this.follow(run))) return;
      }
      await this.lead(run);
    } finally {
      this.setLeader(undefined);
      await Promise.all([candidacy.resign(), listener.close()]);
      election.close();
    }
  };

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
   * every change, until this curator leads (true) or its signal aborts
   * (false). The listener stays up across changes of the election (stale
   * keys of a cold start expiring, candidates arriving): clients reaching
   * it mid-change would otherwise find the port closed.
   *
   * @throws CandidacyLostError when the candidacy ends first.
   */
  private async follow({ ctx, candidacy, listener }: Run): Promise<boolean> {
    const following = new AbortController();
    const signal = AbortSignal.any([ctx.signal, following.signal]);
    const unserved =
      this.config.leaderServiceDefinitions ??
      (this.config.leaderServices ? [] : clusterServiceDefinitions);
    const serving = listener.serve(
      [this.localService(ctx, signal)],
      signal,
      "follower",
      undefined,
      {
        unserved,
        notServed: (path) => notTheLeader(path, "this curator follows", this.knownLeader),
      },
    );
    const leading = candidacy.followUntilLeading(signal, (leader) => this.setLeader(leader));
    try {
      const outcome = await Promise.race([
        leading.then(() => "leads" as const),
        candidacy.lost,
        serving.then(() => "stopped" as const),
      ]);
      if (outcome instanceof Error) throw new CandidacyLostError("follower", outcome);
      return outcome === "leads" && !ctx.signal.aborted;
    } catch (e) {
      if (ctx.signal.aborted) return false;
      throw e;
    } finally {
      following.abort();
      // Both settle once aborted; whichever failed first was thrown by the race.
      await Promise.allSettled([serving, leading]);
    }
  }

  /**
   * Serves the cluster's APIs, with the leader's membership reconciler and
   * the CA's revocations followed, until the candidacy ends or the signal
   * aborts; returns once the listener has shut down and the reconciler has
   * stopped.
   *
   * @throws CandidacyLostError when the candidacy ended.
   */
  private async lead({ ctx, candidacy, listener }: Run): Promise<void> {
    const leading = new AbortController();
    const signal = AbortSignal.any([ctx.signal, leading.signal]);
    let lost: Error | undefined;
    void candidacy.lost.then((why) => {
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
      if (lost && !ctx.signal.aborted) throw new CandidacyLostError("leader", lost);
      throw e;
    } finally {
      // Also when serving failed: the revocations and the reconciler stop with the listener.
      leading.abort();
      await reconciling;
      await nodes.close();
    }
    if (lost && !ctx.signal.aborted) throw new CandidacyLostError("leader", lost);
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
