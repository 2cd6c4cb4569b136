/**
 * The roleserver: runs this node's role-dependent services, and restarts
 * them as the cluster changes the node's roles. The cluster manager feeds it
 * once enrolment succeeded (`provide*Data`); from then on every worker reacts
 * only to the event values in {@link RoleserveValues}.
 *
 *   cluster manager ─provide*Data─▶ enrolment, bootstrapData, curatorConnection
 *                                         │
 *     rolefetch ──▶ localRoles ──▶ controlplane ──▶ localControlPlane ──▶ statuspush
 *        ▲               └───────▶ workloads   ──▶ workloadStatus
 *        └─ curator (Watch)        heartbeat, directory ◀── curatorConnection
 */
import { defaultCuratorPort, directoryCurators } from "@metropolis/curator";
import type { common } from "@metropolis/proto";
import type { Runnable } from "@metropolis/supervisor";
import { controlPlaneWorker, type ControlPlaneConfig } from "./controlplane";
import { directoryWorker } from "./directory";
import { ConsensusViewReader } from "./consensus-view";
import { heartbeatRestartBackoff, heartbeatWorker } from "./heartbeat";
import { nodeCuratorConnection, type NodeCredentials } from "./node-credentials";
import { revocationWorker } from "./revocation";
import { roleFetchWorker } from "./rolefetch";
import { statusPushWorker } from "./statuspush";
import { RoleserveValues, type BootstrapData, type EnrolmentSecrets } from "./values";
import { workloadsWorker, type WorkloadSpec } from "./workloads";

export interface RoleserverConfig extends ControlPlaneConfig {
  /** The workload processes this node runs while it holds the worker role. */
  workloads?: readonly WorkloadSpec[];
  /** Version of the node software, reported in the node status. */
  version: string;
  /** Random identifier of this boot, reported in the node status. */
  bootId: string;
  /** Interval between heartbeats; default half the curator's heartbeat timeout. */
  heartbeatIntervalMs?: number;
}

export class Roleserver {
  readonly values = new RoleserveValues();

  constructor(private readonly config: RoleserverConfig) {}

  /** This node bootstraps a new cluster; the control plane creates it. */
  provideBootstrapData(data: BootstrapData, enrolment: EnrolmentSecrets): void {
    this.values.bootstrapData.set(data);
    this.values.enrolment.set(enrolment);
  }

  /** This node registered with a cluster and was approved. */
  provideRegisterData(
    credentials: NodeCredentials,
    directory: common.ClusterDirectory,
    enrolment: EnrolmentSecrets,
  ): void {
    this.provideMember(credentials, directory, enrolment);
  }

  /** This node rejoined its cluster from its sealed configuration. */
  provideJoinData(
    credentials: NodeCredentials,
    directory: common.ClusterDirectory,
    enrolment: EnrolmentSecrets,
  ): void {
    this.provideMember(credentials, directory, enrolment);
  }

  private provideMember(
    credentials: NodeCredentials,
    directory: common.ClusterDirectory,
    enrolment: EnrolmentSecrets,
  ): void {
    const endpoints = directoryCurators(directory, this.config.curatorPort ?? defaultCuratorPort);
    this.values.curatorConnection.set({
      credentials,
      connection: nodeCuratorConnection(endpoints, credentials),
    });
    this.values.bootstrapData.set(undefined);
    this.values.enrolment.set(enrolment);
  }

  /** The runnable to supervise: waits for enrolment, then runs every worker. */
  readonly run: Runnable = async (ctx) => {
    const enrolment = this.values.enrolment.watch();
    try {
      await enrolment.get({ signal: ctx.signal });
    } finally {
      enrolment.close();
    }
    const { storage } = this.config;
    ctx.run("controlplane", controlPlaneWorker(this.values, this.config));
    ctx.run("rolefetch", roleFetchWorker(this.values, { roles: storage.data.node.roles }));
    ctx.run(
      "statuspush",
      statusPushWorker(this.values, {
        address: this.config.host,
        version: this.config.version,
        bootId: this.config.bootId,
      }),
    );
    // The local etcd member's view, which heartbeats carry to the leader's health check.
    const consensusView = new ConsensusViewReader(this.values, {
      intervalMs: this.config.heartbeatIntervalMs,
    });
    ctx.run("consensusview", consensusView.run);
    ctx.run(
      "heartbeat",
      heartbeatWorker(this.values, {
        intervalMs: this.config.heartbeatIntervalMs,
        consensusView: () => consensusView.latest(),
        wipe: this.values,
      }),
      { backoff: heartbeatRestartBackoff(this.config.heartbeatIntervalMs) },
    );
    ctx.run("workloads", workloadsWorker(this.values, { workloads: this.config.workloads ?? [] }));
    ctx.run("revocation", revocationWorker(this.values, { file: storage.data.node.revocations }));
    ctx.run(
      "directory",
      directoryWorker(this.values, {
        directory: storage.esp.metropolis.clusterDirectory,
        curatorPort: this.config.curatorPort,
      }),
    );
    ctx.healthy();
    await ctx.untilAborted();
  };
}
