/**
 * Scenario 4 of the curator benchmark, heartbeats: every registered node
 * opens a Heartbeat stream (a few at a time: connection, TLS, the leader's
 * caller check; reported as streams per second), then beats once a second,
 * the nodes spread evenly over the second: heartbeats per second answered,
 * p50/p99 answer latency, and the CPU time the leader's process spent per
 * second (read from /proc/<pid>/stat; the clients run in this process, not
 * the leader's). No target.
 */
import { performance } from "node:perf_hooks";
import type { ChannelCredentials } from "@grpc/grpc-js";
import { curatorClientCredentials } from "@metropolis/curator";
import { common, curator as curatorProto } from "@metropolis/proto";
import { percentile, type Row } from "../report";
import type { BenchContext } from "./bench-context";
import type { CuratorProcess } from "./curator-processes";
import { isCancelled, pool } from "./grpc-calls";
import type { RegisteredNode } from "./registration";

/** An answer (or the stream's error) of one heartbeat. */
type Answered = (latencyMs: number, health?: common.NodeHealth, error?: Error) => void;

type HeartbeatStream = ReturnType<curatorProto.CuratorClient["heartbeat"]>;

/** A node's Heartbeat stream, timing each answer against its heartbeat. */
class Beater {
  private client: curatorProto.CuratorClient | undefined;
  private stream: HeartbeatStream | undefined;
  /** Send times of the heartbeats not answered yet: answers come in order, one per heartbeat. */
  private readonly sentAt: number[] = [];

  constructor(
    private readonly address: string,
    private readonly credentials: ChannelCredentials,
    private readonly onAnswer: Answered,
  ) {}

  /** Connects (TLS handshake included), opens the stream and waits for the first answer. */
  open(): Promise<void> {
    this.client = new curatorProto.CuratorClient(this.address, this.credentials);
    const stream = this.client.heartbeat();
    this.stream = stream;
    const opened = new Promise<void>((resolve, reject) => {
      stream.once("data", () => resolve());
      stream.once("error", reject);
    });
    stream.on("data", (res: curatorProto.HeartbeatResponse) => {
      const sent = this.sentAt.shift();
      if (sent === undefined) this.onAnswer(NaN, undefined, new Error("an answer to no heartbeat"));
      else this.onAnswer(performance.now() - sent, res.health);
    });
    stream.on("error", (e) => {
      if (!isCancelled(e)) this.onAnswer(NaN, undefined, e);
    });
    this.beat();
    return opened;
  }

  beat(): void {
    if (this.stream === undefined) throw new Error("a heartbeat before the stream was opened");
    this.sentAt.push(performance.now());
    this.stream.write({});
  }

  close(): void {
    this.stream?.end();
    this.client?.close();
  }
}

export interface Heartbeats {
  /** Heartbeat streams opened per second, before the measurement. */
  opensPerSecond: number;
  /** Heartbeats answered HEALTHY per second. */
  rate: number;
  /** Answer latencies, in milliseconds. */
  p50: number;
  p99: number;
  /** CPU time of the leader's process per second of heartbeats. */
  cpuMsPerSecond: number;
  /** CPU time of this process (the clients) per second of heartbeats. */
  clientCpuMsPerSecond: number;
}

/** Every node beats once a second on its own stream; the leader's CPU time is read meanwhile. */
export async function measureHeartbeats(
  ctx: BenchContext,
  leader: CuratorProcess,
  nodes: readonly RegisteredNode[],
): Promise<Heartbeats> {
  const { heartbeatSeconds, streamOpenConcurrency } = ctx.config;
  const latencies: number[] = [];
  let measuring = false;
  let unhealthy = 0;
  let firstError: Error | undefined;
  let answered = 0;
  let onAnswer = () => {};
  let timers: NodeJS.Timeout[] = [];
  const beaters = nodes.map(
    (node) =>
      new Beater(
        leader.address,
        curatorClientCredentials(ctx.cluster.caPem, node.tls),
        (ms, health, e) => {
          if (e) firstError ??= e;
          else if (health !== common.NodeHealth.HEALTHY) unhealthy++;
          else if (measuring) latencies.push(ms);
          answered++;
          onAnswer();
        },
      ),
  );
  try {
    // Open every stream (a TLS connection each), a few at a time, before measuring.
    ctx.progress(`(4) opening ${beaters.length} heartbeat streams`);
    let started = performance.now();
    await pool(beaters.length, streamOpenConcurrency, (i) => beaters[i].open());
    const opensPerSecond = beaters.length / ((performance.now() - started) / 1000);

    // Each node beats once a second, the nodes spread evenly over the second.
    ctx.progress(`(4) streams open, ${heartbeatSeconds} s of heartbeats`);
    const total = beaters.length * heartbeatSeconds;
    answered = 0;
    measuring = true;
    const cpuBefore = leader.cpuMs();
    const clientCpuBefore = process.cpuUsage();
    started = performance.now();
    timers = beaters.flatMap((b, i) =>
      Array.from({ length: heartbeatSeconds }, (_, k) =>
        setTimeout(() => b.beat(), k * 1000 + (i * 1000) / beaters.length),
      ),
    );
    await new Promise<void>((resolve, reject) => {
      const timeoutMs = (heartbeatSeconds + 30) * 1000;
      const timer = setTimeout(
        () => reject(new Error(`${answered} of ${total} heartbeats answered in ${timeoutMs} ms`)),
        timeoutMs,
      );
      onAnswer = () => {
        if (answered < total) return;
        clearTimeout(timer);
        resolve();
      };
    });
    const seconds = (performance.now() - started) / 1000;
    const cpuMsPerSecond = (leader.cpuMs() - cpuBefore) / seconds;
    const clientCpu = process.cpuUsage(clientCpuBefore);
    if (firstError) throw firstError;
    if (unhealthy > 0) throw new Error(`${unhealthy} heartbeats were answered not HEALTHY`);
    return {
      opensPerSecond,
      rate: latencies.length / seconds,
      p50: percentile(latencies, 50),
      p99: percentile(latencies, 99),
      cpuMsPerSecond,
      clientCpuMsPerSecond: (clientCpu.user + clientCpu.system) / 1000 / seconds,
    };
  } finally {
    timers.forEach(clearTimeout);
    for (const b of beaters) b.close();
  }
}

/** The report rows of the heartbeats. */
export function heartbeatRows(ctx: BenchContext, hb: Heartbeats): Row[] {
  const { nodes, heartbeatSeconds, streamOpenConcurrency } = ctx.config;
  return [
    {
      measure: `(4) heartbeat streams opened (connect, TLS, first answer), ${streamOpenConcurrency} at a time`,
      value: hb.opensPerSecond,
      unit: "streams/s",
    },
    {
      measure: `(4) heartbeats handled, ${nodes} nodes at 1/s for ${heartbeatSeconds} s`,
      value: hb.rate,
      unit: "beats/s",
    },
    { measure: "(4) heartbeat answer latency p50", value: hb.p50, unit: "ms" },
    { measure: "(4) heartbeat answer latency p99", value: hb.p99, unit: "ms" },
    {
      measure: "(4) leader process CPU (own process, /proc)",
      value: hb.cpuMsPerSecond,
      unit: "ms CPU/s",
    },
    {
      measure: "(4) heartbeat clients' CPU (benchmark process)",
      value: hb.clientCpuMsPerSecond,
      unit: "ms CPU/s",
    },
  ];
}
