/**
 * The curator: the cluster's control plane, run on every consensus member.
 * One curator leads and serves the cluster's APIs; the others follow and
 * only tell clients where the leader is.
 *
 *   campaigning ──▶ deciding ──▶ leader   (serves Curator, Management, AAA, CuratorLocal)
 *        ▲                └────▶ follower (serves CuratorLocal; follows the election,
 *        │                          │      republishing the leader, until it leads)
 *        │                          └──── now leads ──▶ leader
 *        └──────────── lease lost (either role) ──┘
 *
 * The machine runs under the supervisor (`ctx.run("curator", curator.run)`);
 * leader and follower states are tagged healthy. The listener is rebuilt on
 * every change of role, on the same port.
 */
import type { ServerCredentials } from "@grpc/grpc-js";
import { MemoryValue } from "@metropolis/event";
import { api, curator as curatorProto } from "@metropolis/proto";
import { aaaServer } from "./aaa-service";
import { curatorServer } from "./curator-service";
import { managementServer } from "./management-service";
import { decodePem } from "@metropolis/pki";
import {
  logProgress,
  machineRunnable,
  type RunContext,
  type Runnable,
  type SupervisedInput,
} from "@metropolis/supervisor";
import { assign, fromPromise, setup } from "xstate";
import { curatorServerCredentials, type TlsPem } from "./credentials";
import { curatorLocalServer } from "./curator-local";
import { HeartbeatTracker } from "./heartbeat-tracker";
import { identifier } from "./identity";
import { followStoredRevocations, Revocations } from "./revocations";
import { clusterCa, type LeaderContext, type RunningConsensus } from "./leader-context";
import { campaign, type Candidacy, type CuratorEndpoint } from "./leadership";
import { Listener, type ServiceEntry } from "./listener";
import { defaultReconcileIntervalMs, membershipReconciler } from "./membership-reconciler";

/** Default port of the curator. */
export const defaultCuratorPort = 7835;

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
  /** Interval of the leader's etcd membership reconciliation. Default 5000 ms. */
  reconcileIntervalMs?: number;
}

const endpointOf = ({ nodeId, host, port }: CuratorEndpoint): CuratorEndpoint => ({
  nodeId,
  host,
  port,
});

interface MachineInput extends SupervisedInput {
  curator: Curator;
}

interface MachineContext extends MachineInput {
  candidacy?: Candidacy;
}

const curatorMachine = setup({
  types: { input: {} as MachineInput, context: {} as MachineContext },
  actors: {
    campaign: fromPromise<Candidacy, MachineInput>(({ input }) =>
      input.curator.campaign(input.ctx),
    ),
    decide: fromPromise<CuratorEndpoint & { leading: boolean }, { candidacy: Candidacy }>(
      ({ input }) => input.candidacy.leader(),
    ),
    serveLeader: fromPromise<void, MachineInput & { candidacy: Candidacy }>(({ input, signal }) =>
      input.curator.serveLeader(input.ctx, input.candidacy, signal),
    ),
    serveFollower: fromPromise<void, MachineInput>(({ input, signal }) =>
      input.curator.serveFollower(input.ctx, signal),
    ),
    leaseLost: fromPromise<void, { candidacy: Candidacy }>(({ input }) => input.candidacy.lost),
    followUntilLeading: fromPromise<void, MachineInput & { candidacy: Candidacy }>(
      ({ input, signal }) =>
        input.candidacy.followUntilLeading(signal, (leader) => input.curator.leader.set(leader)),
    ),
  },
  actions: {
    publishLeader: ({ context }, leader: CuratorEndpoint) => context.curator.leader.set(leader),
    forgetLeader: ({ context }) => context.curator.leader.set(undefined),
  },
}).createMachine({
  id: "curator",
  context: ({ input }) => ({ ...input }),
  initial: "campaigning",
  states: {
    campaigning: {
      entry: "forgetLeader",
      invoke: {
        src: "campaign",
        input: ({ context }) => ({ ctx: context.ctx, curator: context.curator }),
        onDone: { target: "deciding", actions: assign({ candidacy: ({ event }) => event.output }) },
      },
    },
    deciding: {
      invoke: {
        src: "decide",
        input: ({ context }) => ({ candidacy: context.candidacy! }),
        onDone: [
          // A leader announces itself once it serves (serveLeader), not before:
          // clients told of it must find it answering.
          { guard: ({ event }) => event.output.leading, target: "leader" },
          {
            target: "follower",
            actions: { type: "publishLeader", params: ({ event }) => endpointOf(event.output) },
          },
        ],
      },
    },
    leader: {
      tags: ["healthy"],
      invoke: [
        {
          src: "serveLeader",
          input: ({ context }) => ({
            ctx: context.ctx,
            curator: context.curator,
            candidacy: context.candidacy!,
          }),
        },
        {
          src: "leaseLost",
          input: ({ context }) => ({ candidacy: context.candidacy! }),
          onDone: "campaigning",
        },
      ],
    },
    follower: {
      tags: ["healthy"],
      invoke: [
        {
          src: "serveFollower",
          input: ({ context }) => ({ ctx: context.ctx, curator: context.curator }),
        },
        {
          src: "leaseLost",
          input: ({ context }) => ({ candidacy: context.candidacy! }),
          onDone: "campaigning",
        },
        {
          // A follower keeps its listener across changes of the election
          // (stale keys of a cold start expiring, candidates arriving): clients
          // reaching it mid-change would otherwise find the port closed.
          src: "followUntilLeading",
          input: ({ context }) => ({
            ctx: context.ctx,
            curator: context.curator,
            candidacy: context.candidacy!,
          }),
          onDone: "leader",
        },
      ],
    },
  },
});

/** The services a leading curator serves besides CuratorLocal: Curator, Management and AAA. */
export function clusterServices(ctx: LeaderContext): ServiceEntry[] {
  return [
    [curatorProto.CuratorService, curatorServer(ctx)],
    [api.ManagementService, managementServer(ctx)],
    [api.AAAService, aaaServer(ctx)],
  ];
}

export class Curator {
  /** The leader as this curator sees it; undefined while campaigning. */
  readonly leader = new MemoryValue<CuratorEndpoint | undefined>(undefined);
  private readonly self: CuratorEndpoint;
  private readonly credentials: ServerCredentials;
  private listener: Listener | undefined;
  private candidacy: Candidacy | undefined;

  constructor(private readonly config: CuratorConfig) {
    this.self = {
      nodeId: config.nodeId,
      host: config.host,
      port: config.port ?? defaultCuratorPort,
    };
    this.credentials = curatorServerCredentials(config.tls);
  }

  /** The runnable to supervise, e.g. `ctx.run("curator", curator.run)`. */
  readonly run: Runnable = async (ctx) => {
    this.listener = new Listener(
      `${this.self.host}:${this.self.port}`,
      this.credentials,
      ctx.logger,
    );
    try {
      await machineRunnable(curatorMachine, { input: { curator: this } })(ctx);
    } finally {
      this.leader.set(undefined);
      await this.candidacy?.resign();
      this.candidacy = undefined;
    }
  };

  private get kv() {
    return this.config.consensus.client.sub("curator").kv;
  }

  private get secrets() {
    return this.config.consensus.client.sub("curator").secrets;
  }

  /** campaigning: enters the election (replacing an earlier candidacy of this run). */
  async campaign(ctx: RunContext): Promise<Candidacy> {
    await this.candidacy?.resign();
    this.candidacy = await campaign(this.kv, this.self, this.config.leaderTtlSeconds ?? 10);
    ctx.logger.info(`campaigning with election key ${this.candidacy.key}`);
    return this.candidacy;
  }

  /** leader: serves the cluster's APIs until the state is left. */
  async serveLeader(ctx: RunContext, candidacy: Candidacy, signal: AbortSignal): Promise<void> {
    const caDer = decodePem(this.config.tls.ca, "CERTIFICATE");
    const ca = clusterCa(this.secrets);
    // Stopped with the listener, also when serving fails before the state is left.
    const reconcile = new AbortController();
    const revocations = new Revocations(caDer);
    await followStoredRevocations(
      this.kv,
      ca,
      revocations,
      AbortSignal.any([signal, reconcile.signal]),
      (e) => ctx.logger.error(`following the cluster CA's revocation list: ${String(e)}`),
    );
    const leaderCtx: LeaderContext = {
      self: this.self,
      kv: this.kv,
      secrets: this.secrets,
      leadership: candidacy.leadership(),
      consensus: this.config.consensus,
      clusterCa: ca,
      heartbeats: new HeartbeatTracker(this.config.heartbeatTimeoutMs),
      logger: ctx.logger,
      revocations,
      identify: identifier(caDer, revocations),
    };
    ctx.logger.info("elected leader");
    const reconciling = membershipReconciler(
      leaderCtx,
      this.config.reconcileIntervalMs ?? defaultReconcileIntervalMs,
      AbortSignal.any([signal, reconcile.signal]),
    );
    try {
      await this.listener!.serve(
        [
          ...(this.config.leaderServices ?? clusterServices)(leaderCtx),
          this.localService(ctx, signal),
        ],
        signal,
        "leader",
        () => {
          this.leader.set(this.self);
          logProgress(ctx.logger, "serving the cluster's APIs as the leader", {
            event: "curator.leading",
            nodeId: this.self.nodeId,
            address: `${this.self.host}:${this.self.port}`,
          });
        },
      );
    } finally {
      reconcile.abort();
      await reconciling;
    }
  }

  /** follower: serves CuratorLocal until the state is left. */
  async serveFollower(ctx: RunContext, signal: AbortSignal): Promise<void> {
    await this.listener!.serve([this.localService(ctx, signal)], signal, "follower");
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
      }),
    ];
  }
}
