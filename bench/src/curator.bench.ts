/**
 * Curator benchmark: `npm run bench:curator`.
 *
 * What the cluster's control plane costs and how fast it recovers, against
 * one real etcd member (local raft timings) and real gRPC with mutual TLS on
 * loopback:
 *
 * 1. Failover: three curators with a 2 s election lease, the leader in a
 *    process of its own (fixtures/curator-process.ts), the two followers in
 *    this one. The leader's process is SIGKILLed — it cannot resign, so its
 *    election key only goes when its lease expires — and the time until a
 *    follower's `curator.leader` names the follower itself is measured.
 *    Target: lease TTL + 1 s. Median of several rounds.
 * 2. Registration: 1,000 simulated nodes, 20 at a time, each with a fresh
 *    key and its own TLS connection: ephemeral certificate → RegisterNode,
 *    the owner's ApproveNode, CommitNode → UP with a node certificate.
 *    Nodes per second through one leader, and the leader's CPU time per
 *    node (the clients share the machine, so the rate is end to end).
 * 3. Watch backlog: with those 1,001 node records, the time from opening
 *    Watch(NodesInCluster) on an established connection until the
 *    LAST_BACKLOGGED marker arrives — what every node pays to learn the
 *    cluster. Median of several rounds.
 * 4. Heartbeats: the 1,000 nodes open a Heartbeat stream each (50 at a
 *    time: connection, TLS, the leader's caller check; reported as streams
 *    per second), then beat once a second for 10 s, spread evenly over the
 *    second: heartbeats per second answered, p50/p99 answer latency,
 *    and the CPU time the leader's process spent per second (read from
 *    /proc/<pid>/stat; the clients run in this process, not the leader's).
 *
 * The leader of 2–4 also runs in its own process, so that its CPU time is
 * its own. Every process is stopped by PID at the end; a watchdog ends the
 * benchmark if it runs far longer than expected. Prints a table and writes
 * reports/bench-curator.json.
 */
import { fork, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import {
  Metadata,
  status,
  type CallOptions,
  type ChannelCredentials,
  type ServiceError,
} from "@grpc/grpc-js";
import { etcdCertificateKv, keyringCopyKey, unwrapKeyring } from "@metropolis/consensus";
import { freePort, runTestMember, testNode } from "@metropolis/consensus/testing";
import {
  bootstrapCluster,
  clusterCa,
  Curator,
  curatorClientCredentials,
  ownerCommonName,
  type TlsPem,
} from "@metropolis/curator";
import { MemoryValue, waitFor } from "@metropolis/event";
import {
  createEphemeralCertificate,
  generateKeyPair,
  nodeIdFromPublicKey,
  tlsMaterial,
  type CertificateAuthority,
} from "@metropolis/pki";
import { api, common, curator as curatorProto } from "@metropolis/proto";
import { testHarness, type TestHarness } from "@metropolis/supervisor/testing";
import type { CuratorProcessConfig, CuratorProcessMessage } from "./fixtures/curator-process";
import { median, percentile, printTable, writeReport, type Row } from "./report";

const LEADER_TTL_SECONDS = 2;
const FAILOVER_ROUNDS = 5;
const NODES = 1000;
const REGISTER_CONCURRENCY = 20;
const WATCH_ROUNDS = 9;
const HEARTBEAT_SECONDS = 10;
/** Heartbeat streams opened at a time before the heartbeats are measured. */
const STREAM_OPEN_CONCURRENCY = 50;
/** Deadline of every unary call. */
const RPC_DEADLINE_MS = 30_000;
/** The whole benchmark is stopped if it takes longer than this. */
const WATCHDOG_MS = 6 * 60_000;
/** Linux reports /proc/<pid>/stat times in USER_HZ, which is 100 on every architecture. */
const USER_HZ = 100;

/** The etcd member, the cluster CA (with its key) and the identities the benchmark acts as. */
interface Cluster {
  authority: CertificateAuthority;
  caPem: string;
  /** The etcd member's client socket, for curators in other processes. */
  socketPath: string;
  /**
   * The cluster secrets keyring (encoded, base64), for curators in other
   * processes: they open the CA key with it. A benchmark's shortcut on a
   * throwaway cluster; a real curator runs beside its member and uses its keyring.
   */
  keyring: string;
  /** The running consensus, for curators in this process. */
  consensus: Awaited<ReturnType<typeof runTestMember>>["status"];
  owner: TlsPem;
  stop(): Promise<void>;
}

/** A node that went through registration: what it needs to talk to the curator as itself. */
interface RegisteredNode {
  nodeId: string;
  tls: TlsPem;
}

// ---------------------------------------------------------------- helpers

/** Curators listen on their own loopback addresses: 127.0.0.<base + n>. */
const hostBase = 10 + Math.floor(Math.random() * 200);
let hostsUsed = 0;
const nextHost = () => `127.0.0.${hostBase + (hostsUsed++ % 40)}`;

/** A curator's identity: a node key and a node certificate of the cluster CA naming its address. */
async function curatorIdentity(cluster: Cluster, host: string) {
  const keys = generateKeyPair();
  const certificate = await cluster.authority.issueNodeCertificate(keys.publicKey, {
    ipAddresses: [host],
  });
  const tls = tlsMaterial({
    certificate,
    privateKey: keys.privateKey,
    ca: cluster.authority.certificate,
  });
  return { nodeId: nodeIdFromPublicKey(keys.publicKey), tls, host, port: await freePort(host) };
}

/** Runs `task(0)` … `task(count - 1)`, at most `concurrency` at a time. */
async function pool(
  count: number,
  concurrency: number,
  task: (i: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) await task(next++);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
}

type UnaryMethod<Req, Res> = (
  request: Req,
  metadata: Metadata,
  options: Partial<CallOptions>,
  callback: (err: ServiceError | null, res: Res) => void,
) => unknown;

/** A unary call with a deadline: a call that is never answered fails the benchmark, naming itself. */
function rpc<Req, Res>(what: string, method: UnaryMethod<Req, Res>, request: Req): Promise<Res> {
  return new Promise((resolve, reject) =>
    method(request, new Metadata(), { deadline: Date.now() + RPC_DEADLINE_MS }, (err, res) =>
      err
        ? reject(Object.assign(new Error(`${what}: ${err.message}`), { code: err.code }))
        : resolve(res),
    ),
  );
}

const isCancelled = (e: unknown) => (e as Partial<ServiceError>).code === status.CANCELLED;

const benchStart = performance.now();
/** A progress line on stderr, so that a slow phase shows while it runs. */
const progress = (what: string) =>
  console.error(`[${((performance.now() - benchStart) / 1000).toFixed(1)} s] ${what}`);

/** Runs `call` until it is not answered UNAVAILABLE (a listener not bound yet), for up to 10 s. */
async function untilServing<T>(call: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      return await call();
    } catch (e) {
      if ((e as Partial<ServiceError>).code !== status.UNAVAILABLE || Date.now() > deadline)
        throw e;
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}

/** Starts a one-member etcd and bootstraps a cluster in it, as the first node would. */
async function startCluster(): Promise<Cluster> {
  const node = await testNode("bench-curator");
  const member = await runTestMember(node, { bootstrap: true });
  const curatorClient = member.status.client.sub("curator");
  const kv = curatorClient.kv;
  const authority = await clusterCa(curatorClient.secrets).authority(etcdCertificateKv(kv));

  const owner = generateKeyPair();
  const boot = await bootstrapCluster(
    curatorClient,
    { nodeId: node.nodeId, host: "127.0.0.1", port: 1 },
    {
      nodePublicKey: node.publicKey,
      joinPublicKey: generateKeyPair().publicKey,
      clusterUnlockKey: randomBytes(32),
      ownerPublicKey: owner.publicKey,
    },
    LEADER_TTL_SECONDS,
  );
  if (!boot.caCertificate.equals(authority.certificate.der))
    throw new Error("the curator keeps its cluster CA elsewhere than this benchmark expects");

  const ownerCertificate = await authority.issueUserCertificate(ownerCommonName, owner.publicKey);
  return {
    authority,
    caPem: authority.certificate.toPem(),
    socketPath: join(node.storage.ephemeral.consensus.fullPath, "client.sock:0"),
    keyring: await memberKeyring(member.status, node),
    consensus: member.status,
    owner: tlsMaterial({
      certificate: ownerCertificate,
      privateKey: owner.privateKey,
      ca: authority.certificate,
    }),
    stop: async () => {
      await member.harness.cleanup({ timeoutMs: 20_000 }).catch(() => undefined);
      await node.remove();
    },
  };
}

/** The member's keyring, unwrapped from its copy with the node's key. */
async function memberKeyring(
  status: Cluster["consensus"],
  node: Awaited<ReturnType<typeof testNode>>,
): Promise<string> {
  const at = keyringCopyKey(node.nodeId);
  const wrapped = await status.client.kv.get(at).buffer();
  if (wrapped === null) throw new Error(`the member has no keyring copy at ${at}`);
  return unwrapKeyring(wrapped, node.privateKey, at).encode().toString("base64");
}

// ---------------------------------------------------------------- curators

type Endpoint = { nodeId: string; host: string; port: number } | undefined;

/** A curator in a child process (fixtures/curator-process.ts), stopped by its PID. */
class CuratorProcess {
  /** Every child started and not yet exited, so that none outlives the benchmark. */
  static readonly running = new Set<CuratorProcess>();
  /** The leader as the child sees it. */
  readonly leader = new MemoryValue<Endpoint>(undefined);
  readonly exited: Promise<void>;
  private readonly child: ChildProcess;

  private constructor(
    readonly nodeId: string,
    readonly address: string,
    config: CuratorProcessConfig,
  ) {
    this.child = fork(join(__dirname, "fixtures", "curator-process.js"), [JSON.stringify(config)], {
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    this.child.on("message", (m: CuratorProcessMessage) => this.leader.set(m.leader ?? undefined));
    this.exited = new Promise((resolve) => this.child.once("exit", () => resolve()));
    CuratorProcess.running.add(this);
    void this.exited.then(() => CuratorProcess.running.delete(this));
  }

  static async start(cluster: Cluster): Promise<CuratorProcess> {
    const id = await curatorIdentity(cluster, nextHost());
    return new CuratorProcess(id.nodeId, `${id.host}:${id.port}`, {
      socketPath: cluster.socketPath,
      keyring: cluster.keyring,
      nodeId: id.nodeId,
      tls: id.tls,
      host: id.host,
      port: id.port,
      leaderTtlSeconds: LEADER_TTL_SECONDS,
    });
  }

  get pid(): number {
    return this.child.pid!;
  }

  /** Resolves once this curator says it leads. */
  async leading(timeoutMs = 20_000): Promise<void> {
    await waitFor(this.leader, (l) => l?.nodeId === this.nodeId, AbortSignal.timeout(timeoutMs));
  }

  kill(signal: NodeJS.Signals): void {
    if (this.child.exitCode === null && this.child.signalCode === null)
      process.kill(this.pid, signal);
  }

  /** SIGTERM (the curator resigns), SIGKILL if it has not exited after 5 s. */
  async stop(): Promise<void> {
    this.kill("SIGTERM");
    const timer = setTimeout(() => this.kill("SIGKILL"), 5000);
    await this.exited;
    clearTimeout(timer);
  }

  /** CPU time (user + system) the process has used so far, in milliseconds. */
  cpuMs(): number {
    const stat = readFileSync(`/proc/${this.pid}/stat`, "utf8");
    // Fields after the command name (which may contain spaces) in parentheses; utime and stime are fields 14 and 15.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / USER_HZ;
  }
}

/** A curator in this process, under a supervisor of its own. */
async function startLocalCurator(cluster: Cluster) {
  const id = await curatorIdentity(cluster, nextHost());
  const curator = new Curator({
    nodeId: id.nodeId,
    tls: id.tls,
    host: id.host,
    port: id.port,
    consensus: cluster.consensus,
    leaderTtlSeconds: LEADER_TTL_SECONDS,
  });
  const harness: TestHarness = testHarness(async (ctx) => {
    ctx.run("curator", curator.run);
    ctx.healthy();
    await ctx.untilAborted();
  });
  await harness.waitFor("root.curator", "healthy", { timeoutMs: 20_000 });
  return { nodeId: id.nodeId, curator, harness };
}

// ---------------------------------------------------------------- 1. failover

/** One round: time from SIGKILL of the leader's process until a follower leads. */
async function failoverRound(cluster: Cluster): Promise<number> {
  const leader = await CuratorProcess.start(cluster);
  try {
    await leader.leading();
    const followers = [await startLocalCurator(cluster), await startLocalCurator(cluster)];
    try {
      for (const f of followers)
        await waitFor(
          f.curator.leader,
          (l) => l?.nodeId === leader.nodeId,
          AbortSignal.timeout(10_000),
        );
      const done = new AbortController();
      const signal = AbortSignal.any([done.signal, AbortSignal.timeout(20_000)]);
      const started = performance.now();
      leader.kill("SIGKILL");
      await Promise.any(
        followers.map((f) => waitFor(f.curator.leader, (l) => l?.nodeId === f.nodeId, signal)),
      );
      const elapsed = performance.now() - started;
      done.abort();
      return elapsed;
    } finally {
      for (const f of followers) await f.harness.cleanup({ timeoutMs: 10_000 }).catch(() => {});
    }
  } finally {
    await leader.stop();
  }
}

async function measureFailover(cluster: Cluster): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < FAILOVER_ROUNDS; i++) times.push(await failoverRound(cluster));
  return times;
}

// ---------------------------------------------------------------- 2. registration

/** Registers `NODES` nodes through the leader at `address`, `REGISTER_CONCURRENCY` at a time. */
async function measureRegistration(cluster: Cluster, leader: CuratorProcess) {
  const address = leader.address;
  const owner = new api.ManagementClient(
    address,
    curatorClientCredentials(cluster.caPem, cluster.owner),
  );
  try {
    // The curator says it leads a moment before its listener serves: retry until it answers.
    const { ticket } = await untilServing(() =>
      rpc<api.GetRegisterTicketRequest, api.GetRegisterTicketResponse>(
        "GetRegisterTicket",
        owner.getRegisterTicket.bind(owner),
        {},
      ),
    );

    /** One node's way in: register, get approved, commit. */
    const register = async (): Promise<RegisteredNode> => {
      const keys = generateKeyPair();
      const nodeId = nodeIdFromPublicKey(keys.publicKey);
      const ephemeral = await createEphemeralCertificate(keys.privateKey);
      const client = new curatorProto.CuratorClient(
        address,
        curatorClientCredentials(
          cluster.caPem,
          tlsMaterial({ certificate: ephemeral, privateKey: keys.privateKey, ca: ephemeral }),
        ),
      );
      try {
        await rpc<curatorProto.RegisterNodeRequest, curatorProto.RegisterNodeResponse>(
          `RegisterNode of ${nodeId}`,
          client.registerNode.bind(client),
          { registerTicket: ticket, joinKey: generateKeyPair().publicKey, labels: new Map() },
        );
        await rpc<api.ApproveNodeRequest, api.ApproveNodeResponse>(
          `ApproveNode of ${nodeId}`,
          owner.approveNode.bind(owner),
          { node: { $case: "pubkey", pubkey: keys.publicKey } },
        );
        const committed = await rpc<
          curatorProto.CommitNodeRequest,
          curatorProto.CommitNodeResponse
        >(`CommitNode of ${nodeId}`, client.commitNode.bind(client), {
          clusterUnlockKey: randomBytes(32),
        });
        const tls = tlsMaterial({
          certificate: committed.nodeCertificate,
          privateKey: keys.privateKey,
          ca: committed.caCertificate,
        });
        return { nodeId, tls };
      } finally {
        client.close();
      }
    };

    const nodes: RegisteredNode[] = [];
    const latencies: number[] = [];
    const cpuBefore = leader.cpuMs();
    const started = performance.now();
    await pool(NODES, REGISTER_CONCURRENCY, async () => {
      const t = performance.now();
      nodes.push(await register());
      latencies.push(performance.now() - t);
      if (nodes.length % 200 === 0) progress(`(2) ${nodes.length} nodes UP`);
    });
    const seconds = (performance.now() - started) / 1000;
    const leaderCpuMsPerNode = (leader.cpuMs() - cpuBefore) / nodes.length;
    return { nodes, rate: nodes.length / seconds, latencies, leaderCpuMsPerNode };
  } finally {
    owner.close();
  }
}

// ---------------------------------------------------------------- 3. watch backlog

/** Times Watch(NodesInCluster) until LAST_BACKLOGGED, on one connection of node `as`. */
async function measureWatchBacklog(
  cluster: Cluster,
  address: string,
  as: RegisteredNode,
  expected: number,
): Promise<number[]> {
  const client = new curatorProto.CuratorClient(
    address,
    curatorClientCredentials(cluster.caPem, as.tls),
  );
  const once = () =>
    new Promise<number>((resolve, reject) => {
      const started = performance.now();
      let nodes = 0;
      let up = 0;
      const stream = client.watch({ kind: { $case: "nodesInCluster", nodesInCluster: {} } });
      stream.on("data", (res: curatorProto.WatchResponse) => {
        nodes += res.nodes.length;
        up += res.nodes.filter((n) => n.state === common.NodeState.UP).length;
        if (res.progress !== curatorProto.WatchResponse_Progress.LAST_BACKLOGGED) return;
        const elapsed = performance.now() - started;
        stream.cancel();
        if (nodes !== expected || up !== expected)
          reject(new Error(`backlog had ${nodes} nodes (${up} UP), expected ${expected} UP`));
        else resolve(elapsed);
      });
      stream.on("error", (e) => {
        if (!isCancelled(e)) reject(e);
      });
    });
  try {
    await once(); // warm-up: connects, and lets both sides' code get optimized
    const times: number[] = [];
    for (let i = 0; i < WATCH_ROUNDS; i++) times.push(await once());
    return times;
  } finally {
    client.close();
  }
}

// ---------------------------------------------------------------- 4. heartbeats

/** A node's Heartbeat stream, timing each answer against its heartbeat. */
class Beater {
  private client: curatorProto.CuratorClient | undefined;
  private stream: ReturnType<curatorProto.CuratorClient["heartbeat"]> | undefined;
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
    const stream = (this.stream = this.client.heartbeat());
    const opened = new Promise<void>((resolve, reject) => {
      stream.once("data", () => resolve());
      stream.once("error", reject);
    });
    stream.on("data", (res: curatorProto.HeartbeatResponse) =>
      this.onAnswer(performance.now() - this.sentAt.shift()!, res.health),
    );
    stream.on("error", (e) => {
      if (!isCancelled(e)) this.onAnswer(NaN, undefined, e);
    });
    this.beat();
    return opened;
  }

  beat(): void {
    this.sentAt.push(performance.now());
    this.stream!.write({});
  }

  close(): void {
    this.stream?.end();
    this.client?.close();
  }
}

/** An answer (or the stream's error) of one heartbeat. */
type Answered = (latencyMs: number, health?: common.NodeHealth, error?: Error) => void;

/** Every node beats once a second on its own stream; the leader's CPU time is read meanwhile. */
async function measureHeartbeats(
  cluster: Cluster,
  address: string,
  leader: CuratorProcess,
  nodes: readonly RegisteredNode[],
) {
  const latencies: number[] = [];
  let measuring = false;
  let unhealthy = 0;
  let firstError: Error | undefined;
  let answered = 0;
  let onAnswer = () => {};
  let timers: NodeJS.Timeout[] = [];
  const beaters = nodes.map(
    (node) =>
      new Beater(address, curatorClientCredentials(cluster.caPem, node.tls), (ms, health, e) => {
        if (e) firstError ??= e;
        else if (health !== common.NodeHealth.HEALTHY) unhealthy++;
        else if (measuring) latencies.push(ms);
        answered++;
        onAnswer();
      }),
  );
  try {
    // Open every stream (a TLS connection each), a few at a time, before measuring.
    progress(`(4) opening ${beaters.length} heartbeat streams`);
    let started = performance.now();
    await pool(beaters.length, STREAM_OPEN_CONCURRENCY, (i) => beaters[i].open());
    const opensPerSecond = beaters.length / ((performance.now() - started) / 1000);

    // Each node beats once a second, the nodes spread evenly over the second.
    progress(`(4) streams open, ${HEARTBEAT_SECONDS} s of heartbeats`);
    const total = beaters.length * HEARTBEAT_SECONDS;
    answered = 0;
    measuring = true;
    const cpuBefore = leader.cpuMs();
    const clientCpuBefore = process.cpuUsage();
    started = performance.now();
    timers = beaters.flatMap((b, i) =>
      Array.from({ length: HEARTBEAT_SECONDS }, (_, k) =>
        setTimeout(() => b.beat(), k * 1000 + (i * 1000) / beaters.length),
      ),
    );
    await new Promise<void>((resolve, reject) => {
      const timeoutMs = (HEARTBEAT_SECONDS + 30) * 1000;
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

// ---------------------------------------------------------------- main

async function main(): Promise<void> {
  const watchdog = setTimeout(() => {
    console.error(`curator benchmark: still running after ${WATCHDOG_MS / 1000} s, giving up`);
    for (const p of CuratorProcess.running) p.kill("SIGKILL");
    process.exit(1);
  }, WATCHDOG_MS);
  watchdog.unref();

  progress("starting etcd and bootstrapping the cluster");
  const cluster = await startCluster();
  // Interrupted: stop the curators and etcd rather than leave them behind.
  const interrupted = () => {
    for (const p of CuratorProcess.running) p.kill("SIGKILL");
    void cluster.stop().finally(() => process.exit(130));
  };
  process.once("SIGINT", interrupted).once("SIGTERM", interrupted);
  const rows: Row[] = [];
  try {
    progress(`(1) failover, ${FAILOVER_ROUNDS} rounds`);
    const failover = await measureFailover(cluster);
    const failoverMs = median(failover);
    const failoverTarget = (LEADER_TTL_SECONDS + 1) * 1000;
    rows.push({
      measure: `(1) failover after SIGKILL of the leader, TTL ${LEADER_TTL_SECONDS} s (median of ${FAILOVER_ROUNDS})`,
      value: failoverMs,
      unit: "ms",
      target: `< ${failoverTarget} ms`,
      met: failoverMs < failoverTarget,
    });
    rows.push({
      measure: "(1) failover, slowest round",
      value: Math.max(...failover),
      unit: "ms",
    });

    const leader = await CuratorProcess.start(cluster);
    try {
      await leader.leading();

      progress(`(2) registering ${NODES} nodes`);
      const registration = await measureRegistration(cluster, leader);
      rows.push({
        measure: `(2) RegisterNode → UP, ${NODES} nodes, ${REGISTER_CONCURRENCY} in flight`,
        value: registration.rate,
        unit: "nodes/s",
      });
      rows.push({
        measure: "(2) one node's register → approve → commit, median",
        value: median(registration.latencies),
        unit: "ms",
      });
      rows.push({
        measure: "(2) leader process CPU per registered node",
        value: registration.leaderCpuMsPerNode,
        unit: "ms",
      });

      progress("(3) watch backlog");
      const backlog = await measureWatchBacklog(
        cluster,
        leader.address,
        registration.nodes[0],
        NODES + 1, // and the bootstrap node
      );
      const backlogMs = median(backlog);
      rows.push({
        measure: `(3) Watch(all) backlog of ${NODES + 1} nodes (median of ${WATCH_ROUNDS})`,
        value: backlogMs,
        unit: "ms",
        target: "< 250 ms",
        met: backlogMs < 250,
      });

      progress(`(4) heartbeats of ${NODES} nodes`);
      const hb = await measureHeartbeats(cluster, leader.address, leader, registration.nodes);
      rows.push(
        {
          measure: `(4) heartbeat streams opened (connect, TLS, first answer), ${STREAM_OPEN_CONCURRENCY} at a time`,
          value: hb.opensPerSecond,
          unit: "streams/s",
        },
        {
          measure: `(4) heartbeats handled, ${NODES} nodes at 1/s for ${HEARTBEAT_SECONDS} s`,
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
      );
    } finally {
      await leader.stop();
    }
  } finally {
    for (const p of CuratorProcess.running) await p.stop();
    await cluster.stop();
  }
  printTable("curator", rows);
  await writeReport("bench-curator.json", rows);
  clearTimeout(watchdog);
}

main().then(
  // Lingering gRPC channels or etcd watchers must not keep the benchmark alive.
  () => process.exit(0),
  (e: unknown) => {
    console.error(e);
    for (const p of CuratorProcess.running) p.kill("SIGKILL");
    process.exit(1);
  },
);
