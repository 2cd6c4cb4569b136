/**
 * Node health from heartbeats, kept in the leader's memory. A new leader
 * knows nothing of earlier heartbeats: a node it has not heard from is
 * UNKNOWN while the leader is younger than the heartbeat timeout (the node
 * may simply not have beaten yet), and HEARTBEAT_TIMEOUT after that (a live
 * node would have beaten by then) — so a node that died with the old leader
 * does not stay UNKNOWN forever.
 *
 * The timeout is the cluster configuration's `heartbeat_timeout_ms` when it
 * sets one ({@link HeartbeatTracker.configure}: at leader start, and on every
 * ConfigureCluster change), else this curator's local default.
 *
 * Health is computed when asked for, so nothing changes by itself: a node
 * going silent becomes HEARTBEAT_TIMEOUT only in the answer of whoever asks
 * next. Streams that must announce such changes (Management.WatchNodes)
 * subscribe with {@link HeartbeatTracker.onHealthChange}: while anyone is
 * subscribed, one timer per tracker (so one per leadership, whatever the
 * number of streams) checks every node's health once a second and tells
 * every subscriber what changed; a heartbeat that makes a node HEALTHY
 * again is told at once, other heartbeats at the next check (for streams
 * that keep the time since a heartbeat current).
 */
import { performance } from "node:perf_hooks";
import { common } from "@metropolis/proto";
import { WipeAcknowledgements } from "./wipe-acknowledgements";

/** How often a tracker with subscribers looks for health changes (its lateness at most). */
export const healthCheckIntervalMs = 1000;

/** Whole milliseconds of the monotonic clock. */
const monotonicMs = (): number => Math.floor(performance.now());

/** What changed since the previous check of a {@link HeartbeatTracker}. */
export interface HealthChanges {
  /** Nodes heard from whose health changed. */
  readonly nodes: readonly string[];
  /**
   * Whether the health every node never heard from shares (UNKNOWN, then
   * HEARTBEAT_TIMEOUT once the leader is older than the timeout) changed.
   */
  readonly unheard: boolean;
  /** Nodes heard from since the previous check whose health stayed what it was. */
  readonly beaten: readonly string[];
}

/** Told of health changes; see {@link HeartbeatTracker.onHealthChange}. */
export type HealthListener = (changes: HealthChanges) => void;

export class HeartbeatTracker {
  /** The wipes nodes acknowledged on their heartbeats (DecommissionNode with `wipe`). */
  readonly wipes = new WipeAcknowledgements();
  private readonly last = new Map<string, number>();
  private readonly listeners = new Set<HealthListener>();
  /** The health last told to listeners, per node heard from; kept only while there are listeners. */
  private readonly told = new Map<string, common.NodeHealth>();
  /** The health of unheard nodes last told to listeners. */
  private toldUnheard: common.NodeHealth = common.NodeHealth.UNKNOWN;
  private checking: ReturnType<typeof setInterval> | undefined;
  /** Nodes that beat since the last check, without a change of health; kept only while there are listeners. */
  private readonly beatenSince = new Set<string>();
  /** When this tracker (this leadership) started. */
  private readonly since: number;
  /** The cluster configuration's timeout, when it sets one. */
  private configured: number | undefined;

  constructor(
    /** A node that has not sent a heartbeat for this long is HEARTBEAT_TIMEOUT. Default 10 s. */
    private readonly defaultTimeoutMs = 10_000,
    /**
     * Whole milliseconds of a monotonic clock: a jump of the wall clock must
     * neither time every node out nor keep a silent one HEALTHY (the e2e
     * clock-jump test found both, with ±60 s). Whole, as the listing's
     * `time_since_heartbeat_ms` is an integer.
     * @default the monotonic clock, `performance.now()` floored
     */
    private readonly clock: () => number = monotonicMs,
  ) {
    this.since = clock();
  }

  /** The tracker's time now: pass it to {@link health} and {@link sinceLast} to judge many nodes at one moment. */
  now(): number {
    return this.clock();
  }

  /** The timeout in force. */
  get timeoutMs(): number {
    return this.configured ?? this.defaultTimeoutMs;
  }

  /** Follows the cluster configuration: its `heartbeat_timeout_ms`, 0 for the local default. */
  configure(config: common.ClusterConfiguration | undefined): void {
    const ms = config?.heartbeatTimeoutMs ?? 0;
    this.configured = ms > 0 ? ms : undefined;
  }

  /** Records a heartbeat of `nodeId` now. */
  beat(nodeId: string): void {
    this.last.set(nodeId, this.clock());
    if (this.listeners.size === 0) return;
    if (this.told.get(nodeId) === common.NodeHealth.HEALTHY) {
      this.beatenSince.add(nodeId);
      return;
    }
    this.told.set(nodeId, common.NodeHealth.HEALTHY);
    this.tell({ nodes: [nodeId], unheard: false, beaten: [] });
  }

  /** The health of `nodeId` at time `now` (by default the tracker's time now). */
  health(nodeId: string, now = this.clock()): common.NodeHealth {
    const at = this.last.get(nodeId);
    if (at === undefined) return this.unheardHealth(now);
    return now - at > this.timeoutMs
      ? common.NodeHealth.HEARTBEAT_TIMEOUT
      : common.NodeHealth.HEALTHY;
  }

  /** Milliseconds since the last heartbeat of `nodeId`, or undefined if none was seen. */
  sinceLast(nodeId: string, now = this.clock()): number | undefined {
    const at = this.last.get(nodeId);
    return at === undefined ? undefined : now - at;
  }

  /** Forgets a deleted node. */
  forget(nodeId: string): void {
    this.last.delete(nodeId);
    this.told.delete(nodeId);
    this.beatenSince.delete(nodeId);
    this.wipes.forget(nodeId);
  }

  /**
   * Calls `listener` with the health changes found from now on, until the
   * returned function is called. The first subscriber starts the tracker's
   * check timer, the last one to leave stops it. A listener must not throw.
   */
  onHealthChange(listener: HealthListener): () => void {
    if (this.listeners.size === 0) {
      // Changes count from now: what is current is what the subscriber reads itself.
      for (const id of this.last.keys()) this.told.set(id, this.health(id));
      this.toldUnheard = this.unheardHealth();
      this.checking = setInterval(() => this.checkHealth(), healthCheckIntervalMs);
      // The leader's process ends on its own terms, not this timer's.
      this.checking.unref();
    }
    this.listeners.add(listener);
    return () => {
      if (!this.listeners.delete(listener) || this.listeners.size > 0) return;
      clearInterval(this.checking);
      this.checking = undefined;
      this.told.clear();
      this.beatenSince.clear();
    };
  }

  /**
   * Compares every node's health with what listeners were last told and
   * tells them the differences. The timer of {@link onHealthChange} calls it
   * every {@link healthCheckIntervalMs}; tests with a fake clock call it
   * themselves.
   */
  checkHealth(): void {
    if (this.listeners.size === 0) return;
    const nodes: string[] = [];
    for (const id of this.last.keys()) {
      const health = this.health(id);
      if (this.told.get(id) === health) continue;
      this.told.set(id, health);
      nodes.push(id);
    }
    const unheardHealth = this.unheardHealth();
    const unheard = unheardHealth !== this.toldUnheard;
    this.toldUnheard = unheardHealth;
    for (const id of nodes) this.beatenSince.delete(id);
    const beaten = [...this.beatenSince];
    this.beatenSince.clear();
    if (nodes.length > 0 || unheard || beaten.length > 0) this.tell({ nodes, unheard, beaten });
  }

  private unheardHealth(now = this.clock()): common.NodeHealth {
    return now - this.since > this.timeoutMs
      ? common.NodeHealth.HEARTBEAT_TIMEOUT
      : common.NodeHealth.UNKNOWN;
  }

  private tell(changes: HealthChanges): void {
    for (const listener of this.listeners) listener(changes);
  }
}
