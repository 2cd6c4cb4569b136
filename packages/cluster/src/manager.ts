/**
 * The enrolment manager: decides how this node enters its cluster, does it
 * once per node run, and from then on publishes the node's cluster status.
 *
 *   deciding ──sealed configuration──▶ joining ──────┐
 *       ├────cluster_bootstrap──────▶ bootstrapping ─┼──▶ home (publishes status)
 *       └────cluster_register───────▶ registering ───┘
 *
 * Any failure of a flow is final for this node run (the seed's "trapdoor"):
 * the flows change storage, so they are never retried blindly. The error is
 * published through `failure` (the node prints it and stops) and the
 * runnable fails; a second run after a failure fails at once. So does a
 * node that is home when the cluster deletes it (DISOWNING,
 * NodeDeletedError): it stops rather than go on as a node of no cluster.
 * One whose record, from the curator, asks it to wipe itself (decommissioned
 * with `--wipe`) first has its heartbeat acknowledge that, then ends with
 * NodeWipeOrderedError, on which metropolis-node erases its storage.
 */
import { MemoryValue, waitFor, type Watcher } from "@metropolis/event";
import { ensureMachineKey, type NodeRoot } from "@metropolis/localstorage";
import { defaultCuratorPort } from "@metropolis/curator";
import { common, type priv } from "@metropolis/proto";
import type { LocalControlPlane, NodeCredentials, Roleserver } from "@metropolis/roleserve";
import type { RunContext, Runnable } from "@metropolis/supervisor";
import { machineRunnable, type SupervisedInput } from "@metropolis/supervisor/xstate";
import { assign, fromPromise, setup } from "xstate";
import { bootstrapCluster } from "./bootstrap-flow";
import type { EnrolmentEnv } from "./enrolment-env";
import {
  EnrolmentRestartedError,
  NodeDeletedError,
  NodeWipeOrderedError,
  SealedConfigurationMissingError,
} from "./errors";
import { joinCluster } from "./join-flow";
import { readNodeParameters, type Enrolment } from "./node-parameters";
import { registerNode } from "./register-flow";
import { readSealedConfiguration } from "./sealed-configuration";
import { ClusterStatus } from "./status";

export interface ClusterManagerConfig {
  storage: NodeRoot;
  /** The machine key the sealed configuration is sealed with (kept off the ESP). */
  machineKeyPath: string;
  /** Node parameters given on the command line; they win over the ESP's. */
  parametersPath?: string;
  roleserver: Roleserver;
  /** This node's address, as other nodes reach it. */
  address: string;
  /** The cluster's curator port. Default 7835. */
  curatorPort?: number;
  /** Interval of CommitNode attempts while waiting for approval. Default 1 s. */
  commitIntervalMs?: number;
  /**
   * How long a node told to wipe itself waits for its heartbeat to deliver
   * the acknowledgement before it stops anyway (it wipes either way: its
   * record said so). Default {@link defaultWipeAcknowledgementWaitMs}.
   */
  wipeAcknowledgementWaitMs?: number;
}

/**
 * Default of `wipeAcknowledgementWaitMs`: a few heartbeat intervals (5 s),
 * less than the curator's wait for the acknowledgement (30 s).
 */
export const defaultWipeAcknowledgementWaitMs = 20_000;

type Plan = { kind: "join"; sealed: priv.SealedConfiguration } | Enrolment;

interface MachineInput extends SupervisedInput {
  manager: ClusterManager;
}

interface MachineContext extends MachineInput {
  plan?: Plan;
  credentials?: NodeCredentials;
}

const enrolmentMachine = setup({
  types: { input: {} as MachineInput, context: {} as MachineContext },
  actors: {
    decide: fromPromise<Plan, MachineInput>(({ input }) => input.manager.decide(input.ctx)),
    enrol: fromPromise<NodeCredentials, MachineInput & { plan: Plan }>(({ input }) =>
      input.manager.enrol(input.ctx, input.plan),
    ),
    publish: fromPromise<void, MachineInput & { credentials: NodeCredentials }>(
      ({ input, signal }) => input.manager.publishHome(input.credentials, signal),
    ),
  },
}).createMachine({
  id: "enrolment",
  context: ({ input }) => ({ ...input }),
  initial: "deciding",
  states: {
    deciding: {
      invoke: {
        src: "decide",
        input: ({ context }) => ({ ctx: context.ctx, manager: context.manager }),
        onDone: { target: "enrolling", actions: assign({ plan: ({ event }) => event.output }) },
      },
    },
    enrolling: {
      invoke: {
        src: "enrol",
        input: ({ context }) => ({
          ctx: context.ctx,
          manager: context.manager,
          plan: context.plan!,
        }),
        onDone: {
          target: "home",
          actions: assign({ credentials: ({ event }) => event.output }),
        },
      },
    },
    home: {
      tags: ["healthy"],
      invoke: {
        src: "publish",
        input: ({ context }) => ({
          ctx: context.ctx,
          manager: context.manager,
          credentials: context.credentials!,
        }),
      },
    },
  },
});

export class ClusterManager {
  /** This node's cluster status; UNKNOWN until enrolment got somewhere. */
  readonly status = new MemoryValue<ClusterStatus>(new ClusterStatus(common.ClusterState.UNKNOWN));
  /**
   * Rejects with the error that ended this node's run in its cluster: a
   * failed enrolment, NodeDeletedError, or NodeWipeOrderedError.
   */
  readonly failure: Promise<never>;
  private fail: (e: unknown) => void = () => undefined;
  private failed: unknown;
  private credentials: NodeCredentials | undefined;
  private controlPlane: LocalControlPlane | undefined;
  private started = false;
  private state: common.ClusterState = common.ClusterState.UNKNOWN;

  constructor(private readonly config: ClusterManagerConfig) {
    this.failure = new Promise<never>((_, reject) => (this.fail = reject));
    // Nobody may be listening; the rejection is reported through the runnable too.
    this.failure.catch(() => undefined);
  }

  /** The runnable to supervise. Enrols once; a restart after success only publishes. */
  readonly run: Runnable = async (ctx) => {
    if (this.failed !== undefined) throw new EnrolmentRestartedError(this.failed);
    if (this.credentials) {
      ctx.healthy();
      return this.publishHome(this.credentials, ctx.signal);
    }
    if (this.started) throw new EnrolmentRestartedError("it was interrupted");
    this.started = true;
    try {
      await machineRunnable(enrolmentMachine, { input: { manager: this } })(ctx);
    } catch (e) {
      if (!ctx.signal.aborted && this.credentials === undefined) {
        this.failed = e;
        this.fail(e);
      }
      throw e;
    }
  };

  /**
   * deciding: a sealed configuration means join; else the node parameters
   * say. Everything here is local: a node that is to enrol afresh first
   * checks that its storage can take a new node (see {@link checkFreshStorage}),
   * so that a refusal comes before the cluster has heard of it.
   */
  async decide(ctx: RunContext): Promise<Plan> {
    const { storage, machineKeyPath } = this.config;
    await storage.esp.metropolis.mkdirAll();
    const sealed = await readSealedConfiguration(storage, machineKeyPath);
    if (sealed) {
      if (this.config.parametersPath !== undefined) {
        ctx.logger.warn(
          `node parameters ${this.config.parametersPath} ignored: this node already belongs to a cluster`,
        );
      }
      return { kind: "join", sealed };
    }
    await this.checkFreshStorage();
    return readNodeParameters(
      storage.esp.metropolis.parameters,
      this.config.parametersPath,
      ctx.logger,
    );
  }

  /**
   * The local checks of a node without a sealed configuration, before it
   * bootstraps or registers: its data directory must hold no node (else the
   * sealed configuration was lost, and a new enrolment would only end in
   * `DataAlreadyInitializedError` after registering: a ghost record per
   * start), and the machine key that will seal the new configuration must be
   * usable.
   */
  private async checkFreshStorage(): Promise<void> {
    const { storage, machineKeyPath } = this.config;
    if (await storage.data.isInitialized()) {
      throw new SealedConfigurationMissingError(
        storage.esp.metropolis.sealedConfiguration.fullPath,
        storage.data.fullPath,
      );
    }
    await ensureMachineKey(machineKeyPath);
  }

  /** enrolling: runs the chosen flow. */
  async enrol(ctx: RunContext, plan: Plan): Promise<NodeCredentials> {
    const env: EnrolmentEnv = {
      ctx,
      storage: this.config.storage,
      machineKeyPath: this.config.machineKeyPath,
      roleserver: this.config.roleserver,
      address: this.config.address,
      curatorPort: this.config.curatorPort ?? defaultCuratorPort,
      commitIntervalMs: this.config.commitIntervalMs ?? 1000,
      setState: (state, credentials) => this.publish(state, credentials),
    };
    let credentials: NodeCredentials;
    switch (plan.kind) {
      case "join":
        credentials = await joinCluster(env, plan.sealed);
        break;
      case "bootstrap":
        credentials = await bootstrapCluster(env, plan.bootstrap);
        break;
      case "register":
        credentials = await registerNode(env, plan.register);
        break;
    }
    this.credentials = credentials;
    return credentials;
  }

  /**
   * home: HOME, with the local consensus client whenever a control plane
   * runs, until the cluster disowns this node (the roleserver's `disowned`):
   * then DISOWNING, and the node run ends with NodeDeletedError — or, when
   * the node's record asked for a wipe (`wipeOrdered`, set from the curator
   * only), with NodeWipeOrderedError once the heartbeat acknowledged it (or
   * `wipeAcknowledgementWaitMs` passed).
   */
  async publishHome(credentials: NodeCredentials, signal: AbortSignal): Promise<void> {
    this.credentials = credentials;
    this.publish(common.ClusterState.HOME, credentials);
    const stop = new AbortController();
    const following = this.followControlPlane(credentials, AbortSignal.any([signal, stop.signal]));
    let reason: string;
    try {
      reason = await waitFor(this.config.roleserver.values.disowned, () => true, signal);
    } finally {
      stop.abort();
      await following.catch(() => undefined);
    }
    const values = this.config.roleserver.values;
    const wipe = await waitFor(values.wipeOrdered, () => true, signal);
    let error: NodeDeletedError | NodeWipeOrderedError;
    if (wipe) {
      const acknowledged = await this.wipeAcknowledged(signal);
      error = new NodeWipeOrderedError(credentials.nodeId, acknowledged);
    } else {
      error = new NodeDeletedError(credentials.nodeId, reason);
    }
    this.publish(common.ClusterState.DISOWNING, credentials);
    this.failed = error;
    this.fail(error);
    throw error;
  }

  /**
   * Whether the heartbeat delivered the wipe's acknowledgement within
   * `wipeAcknowledgementWaitMs` (the tree, heartbeat included, runs on
   * meanwhile). Rejects when `signal` aborts (the node is stopping).
   */
  private async wipeAcknowledged(signal: AbortSignal): Promise<boolean> {
    const waitMs = this.config.wipeAcknowledgementWaitMs ?? defaultWipeAcknowledgementWaitMs;
    const deadline = AbortSignal.timeout(waitMs);
    try {
      return await waitFor(
        this.config.roleserver.values.wipeAcknowledged,
        (acknowledged) => acknowledged,
        AbortSignal.any([signal, deadline]),
      );
    } catch (e) {
      if (deadline.aborted && !signal.aborted) return false;
      throw e;
    }
  }

  /** Republishes the status whenever the local control plane comes or goes. */
  private async followControlPlane(
    credentials: NodeCredentials,
    signal: AbortSignal,
  ): Promise<never> {
    const watcher: Watcher<LocalControlPlane | undefined> =
      this.config.roleserver.values.localControlPlane.watch();
    try {
      for (;;) {
        const controlPlane = await watcher.get({ signal });
        this.publish(this.state, credentials, { controlPlane });
      }
    } finally {
      watcher.close();
    }
  }

  /** Publishes `state`; the control plane is kept unless `change` gives a new one (or none). */
  private publish(
    state: common.ClusterState,
    credentials?: NodeCredentials,
    change?: { controlPlane: LocalControlPlane | undefined },
  ): void {
    this.state = state;
    if (change) this.controlPlane = change.controlPlane;
    this.status.set(new ClusterStatus(state, credentials, this.controlPlane?.consensus.client));
  }
}
