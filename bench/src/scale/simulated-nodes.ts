/**
 * The scale simulator's nodes: many enrolled nodes in this one process, each
 * running what a real node runs to stay HEALTHY — the roleserver's own
 * heartbeat worker, on its own `CuratorConnection` (its own identity, its own
 * TLS connection, the node's leader discovery and retries) under a
 * supervisor, so that a failed stream is restarted with the supervisor's
 * jittered backoff exactly as on a node. Nothing here is a stand-in for the
 * node's client: a bottleneck found here is fixed in roleserve or curator.
 *
 * The supervisor's log lines are counted, not written (thousands of nodes
 * each logging their restarts would measure the terminal); the first error
 * is kept for the report. The simulator runs these in node host processes
 * (scale/node-hosts.ts), each with its share of the nodes.
 */
import { CuratorConnection, type CuratorAddress } from "@metropolis/curator";
import { MemoryValue } from "@metropolis/event";
import {
  heartbeatRestartBackoff,
  heartbeatWorker,
  type CuratorConnectionValue,
} from "@metropolis/roleserve";
import { supervise, type Logger, type Runnable, type Supervisor } from "@metropolis/supervisor";
import type { RegisteredNode } from "../curator/registration";

/** A logger that writes nothing and counts what it was given. */
class CountingLogger implements Logger {
  errors = 0;
  warnings = 0;
  firstError: string | undefined;
  error(message: string): void {
    this.errors++;
    this.firstError ??= message;
  }
  warn(): void {
    this.warnings++;
  }
  info(): void {}
  debug(): void {}
  isLevelEnabled(level: string): boolean {
    return level === "error" || level === "warn";
  }
}

export class SimulatedNodes {
  /** Answer latencies of heartbeats, in ms, while recording. */
  readonly latencies: number[] = [];
  readonly log = new CountingLogger();
  private recording = false;
  private readonly connections: CuratorConnection[] = [];
  /** One supervision tree per batch added (a runnable starts its children before it is healthy). */
  private readonly supervisors: Supervisor[] = [];
  private count = 0;

  constructor(
    private readonly caPem: string,
    private readonly curators: readonly CuratorAddress[],
    private readonly heartbeatIntervalMs: number,
  ) {}

  get size(): number {
    return this.count;
  }

  /** Starts the heartbeat worker of each of `nodes`, under a new supervision tree. */
  add(nodes: readonly RegisteredNode[]): void {
    const workers: Record<string, Runnable> = {};
    for (const node of nodes) {
      const connection = new CuratorConnection({
        endpoints: this.curators,
        ca: this.caPem,
        identity: { cert: node.tls.cert, key: node.tls.key },
      });
      this.connections.push(connection);
      const value = new MemoryValue<CuratorConnectionValue>({
        credentials: node.credentials,
        connection,
      });
      workers[`n${this.count++}`] = heartbeatWorker(
        { curatorConnection: value },
        {
          intervalMs: this.heartbeatIntervalMs,
          onAnswered: (ms) => {
            if (this.recording) this.latencies.push(ms);
          },
        },
      );
    }
    this.supervisors.push(
      supervise(
        async (ctx) => {
          // Restarted as the roleserver restarts a node's heartbeat worker.
          const backoff = heartbeatRestartBackoff(this.heartbeatIntervalMs);
          for (const [name, worker] of Object.entries(workers)) ctx.run(name, worker, { backoff });
          ctx.healthy();
          await ctx.untilAborted();
        },
        { logger: this.log },
      ),
    );
  }

  /** Records heartbeat latencies from now (clearing earlier ones) until `stopRecording`. */
  startRecording(): void {
    this.latencies.length = 0;
    this.recording = true;
  }

  stopRecording(): void {
    this.recording = false;
  }

  /** Stops every node's worker and closes its connection. */
  async stop(): Promise<void> {
    await Promise.all(this.supervisors.map((s) => s.stop()));
    for (const c of this.connections) c.close();
  }
}
