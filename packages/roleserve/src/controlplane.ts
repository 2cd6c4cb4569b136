/**
 * The control plane launcher: runs this node's consensus member and curator
 * while the node should run a control plane (see controlplane-startup.ts).
 *
 *   deciding ──▶ idle (no control plane) ─────────────── flip ──▶ (restart)
 *       └──────▶ consensus ──▶ bootstrapping? ──▶ curator ──▶ serving ── flip / etcd stopped ──▶ (restart)
 *
 * It never adjusts a running control plane: when "should run" flips, or
 * etcd stops under the curator, the launcher fails with a typed error, the
 * supervisor cancels its children (stopping etcd and the curator) and starts
 * it again, and the new run decides afresh — seed 004's launcher pattern.
 *
 * While it serves, the sealed configuration holds the cluster CA and the
 * cluster unlock key, so that the node can come back on its own when the
 * whole cluster was powered off (see priv.SealedConfiguration); without a
 * control plane the unlock key is removed from it again, and so is a stale
 * etcd data directory of a member that was removed.
 */
import { rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { ConsensusService, defaultPeerPort, type EtcdTimings } from "@metropolis/consensus";
import {
  bootstrapCluster,
  Curator,
  CuratorConnection,
  defaultCuratorPort,
  type RunningConsensus as RunningConsensusStatus,
} from "@metropolis/curator";
import { waitFor } from "@metropolis/event";
import { sealConfiguration, type NodeRoot } from "@metropolis/localstorage";
import { nodeIdFromPublicKey, publicKeyFromPrivateKey } from "@metropolis/pki";
import { priv } from "@metropolis/proto";
import {
  machineRunnable,
  type RunContext,
  type Runnable,
  type SupervisedInput,
} from "@metropolis/supervisor";
import { assign, fromPromise, setup } from "xstate";
import { ConsensusStoppedError, RolesChangedError } from "./errors";
import { credentialsPem, saveCredentials, type NodeCredentials } from "./node-credentials";
import { StartupWatcher, type ControlPlaneStartup } from "./controlplane-startup";
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

interface MachineInput extends SupervisedInput {
  launcher: ControlPlaneLauncher;
}

interface MachineContext extends MachineInput {
  startup?: RunStartup;
  consensus?: RunningConsensusStatus;
  credentials?: NodeCredentials;
}

const controlPlaneMachine = setup({
  types: { input: {} as MachineInput, context: {} as MachineContext },
  actors: {
    decide: fromPromise<ControlPlaneStartup, MachineInput>(({ input, signal }) =>
      input.launcher.startups.next(signal),
    ),
    stand: fromPromise<void, MachineInput>(({ input }) => input.launcher.standDown(input.ctx)),
    startConsensus: fromPromise<RunningConsensusStatus, MachineInput & { startup: RunStartup }>(
      ({ input, signal }) => input.launcher.startConsensus(input.ctx, input.startup, signal),
    ),
    finishBootstrap: fromPromise<
      NodeCredentials,
      MachineInput & { startup: RunStartup; consensus: RunningConsensusStatus }
    >(({ input }) => input.launcher.finishBootstrap(input.ctx, input.startup, input.consensus)),
    startCurator: fromPromise<
      void,
      MachineInput & {
        startup: RunStartup;
        consensus: RunningConsensusStatus;
        credentials: NodeCredentials;
      }
    >(({ input }) =>
      input.launcher.startCurator(input.ctx, input.startup, input.consensus, input.credentials),
    ),
    untilFlip: fromPromise<never, MachineInput & { running: boolean }>(({ input, signal }) =>
      input.launcher.untilFlip(input.running, signal),
    ),
    untilConsensusStops: fromPromise<never, MachineInput>(({ input, signal }) =>
      input.launcher.untilConsensusStops(signal),
    ),
  },
}).createMachine({
  id: "controlplane",
  context: ({ input }) => ({ ...input }),
  initial: "deciding",
  states: {
    deciding: {
      invoke: {
        src: "decide",
        input: ({ context }) => ({ ctx: context.ctx, launcher: context.launcher }),
        onDone: [
          {
            guard: ({ event }) => event.output.run,
            target: "consensus",
            actions: assign({ startup: ({ event }) => event.output as RunStartup }),
          },
          { target: "idle" },
        ],
      },
    },
    idle: {
      initial: "standingDown",
      states: {
        standingDown: {
          invoke: {
            src: "stand",
            input: ({ context }) => ({ ctx: context.ctx, launcher: context.launcher }),
            onDone: "waiting",
          },
        },
        waiting: { tags: ["healthy"] },
      },
      invoke: {
        src: "untilFlip",
        input: ({ context }) => ({ ctx: context.ctx, launcher: context.launcher, running: false }),
      },
    },
    consensus: {
      invoke: {
        src: "startConsensus",
        input: ({ context }) => ({
          ctx: context.ctx,
          launcher: context.launcher,
          startup: context.startup!,
        }),
        onDone: [
          {
            guard: ({ context }) => context.startup!.credentials === undefined,
            target: "bootstrapping",
            actions: assign({ consensus: ({ event }) => event.output }),
          },
          {
            target: "curator",
            actions: assign({
              consensus: ({ event }) => event.output,
              credentials: ({ context }) => context.startup!.credentials,
            }),
          },
        ],
      },
    },
    bootstrapping: {
      invoke: {
        src: "finishBootstrap",
        input: ({ context }) => ({
          ctx: context.ctx,
          launcher: context.launcher,
          startup: context.startup!,
          consensus: context.consensus!,
        }),
        onDone: {
          target: "curator",
          actions: assign({ credentials: ({ event }) => event.output }),
        },
      },
    },
    curator: {
      invoke: {
        src: "startCurator",
        input: ({ context }) => ({
          ctx: context.ctx,
          launcher: context.launcher,
          startup: context.startup!,
          consensus: context.consensus!,
          credentials: context.credentials!,
        }),
        onDone: "serving",
      },
    },
    serving: {
      tags: ["healthy"],
      invoke: [
        {
          src: "untilFlip",
          input: ({ context }) => ({ ctx: context.ctx, launcher: context.launcher, running: true }),
        },
        {
          src: "untilConsensusStops",
          input: ({ context }) => ({ ctx: context.ctx, launcher: context.launcher }),
        },
      ],
    },
  },
});

/** The launcher's work; the machine above decides when each step runs. */
class ControlPlaneLauncher {
  readonly startups: StartupWatcher;
  private service: ConsensusService | undefined;

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

  /** No control plane: none is published, no unlock key stays sealed, no stale etcd data stays. */
  async standDown(ctx: RunContext): Promise<void> {
    this.values.localControlPlane.set(undefined);
    const enrolment = this.startups.secrets!;
    if (enrolment.sealed.clusterUnlockKey.length > 0) {
      await this.reseal(enrolment, { clusterUnlockKey: Buffer.alloc(0) });
      ctx.logger.info(
        "not a consensus member: cluster unlock key removed from the sealed configuration",
      );
    }
    const member = join(this.config.storage.data.etcd.data.fullPath, "member");
    if (
      await stat(member).then(
        () => true,
        () => false,
      )
    ) {
      // A member removed from etcd must never start from its old data again:
      // if the role comes back, it joins afresh.
      await rm(member, { recursive: true, force: true });
      ctx.logger.info("not a consensus member: removed the etcd data of an earlier membership");
    }
  }

  async startConsensus(
    ctx: RunContext,
    startup: RunStartup,
    signal: AbortSignal,
  ): Promise<RunningConsensusStatus> {
    const privateKey = startup.bootstrap?.nodePrivateKey ?? startup.credentials!.privateKey;
    const nodeId = nodeIdFromPublicKey(publicKeyFromPrivateKey(privateKey));
    this.service = new ConsensusService({
      nodeId,
      nodePrivateKey: privateKey,
      storage: this.config.storage,
      peer: { host: this.config.host, port: this.consensusPort },
      bootstrap: startup.bootstrap !== undefined && startup.join === undefined,
      join: startup.join,
      timings: this.config.timings,
      etcdBinary: this.config.etcdBinary,
      autopromoteIntervalMs: this.config.autopromoteIntervalMs,
    });
    ctx.run("consensus", this.service.run);
    const status = await waitFor(this.service.status, (s) => s.state === "running", signal);
    return status as RunningConsensusStatus;
  }

  /**
   * The last step of a bootstrap: as the only curator candidate, create the
   * cluster's CA and first records (idempotent, so a crash half-way is
   * retried safely), then keep the node's credentials.
   */
  async finishBootstrap(
    ctx: RunContext,
    startup: RunStartup,
    consensus: RunningConsensusStatus,
  ): Promise<NodeCredentials> {
    const bootstrap = startup.bootstrap!;
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
        configuration: { storagePolicy: startup.enrolment.sealed.storagePolicy },
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
      },
      kubernetesController: {},
    });
    ctx.logger.info(
      result.created ? "cluster bootstrapped" : "cluster bootstrap had already finished",
    );
    return credentials;
  }

  async startCurator(
    ctx: RunContext,
    startup: RunStartup,
    consensus: RunningConsensusStatus,
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
        connection: new CuratorConnection({
          endpoints: [`${this.config.host}:${this.curatorPort}`],
          ca: credentialsPem(credentials).ca,
          identity: credentialsPem(credentials),
        }),
      });
      // Done: from now on this node runs a control plane for its roles like
      // any other, also when a later run of this launcher decides afresh.
      this.values.bootstrapData.set(undefined);
    }
    this.values.localControlPlane.set({ consensus, curator, curatorPort: this.curatorPort });
  }

  /** Fails once "should run a control plane" differs from `running`. */
  async untilFlip(running: boolean, signal: AbortSignal): Promise<never> {
    for (;;) {
      const startup = await this.startups.next(signal);
      if (startup.run !== running) throw new RolesChangedError("control plane", startup.run);
    }
  }

  /** Fails when the consensus member stops under the curator. */
  async untilConsensusStops(signal: AbortSignal): Promise<never> {
    await waitFor(this.service!.status, (s) => s.state !== "running", signal);
    throw new ConsensusStoppedError();
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
      await machineRunnable(controlPlaneMachine, { input: { launcher } })(ctx);
    } finally {
      values.localControlPlane.set(undefined);
      launcher.close();
    }
  };
}
