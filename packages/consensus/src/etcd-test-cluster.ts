/**
 * A real etcd cluster for tests that need etcd but not the consensus service:
 * plain-HTTP peers and clients on loopback, tight raft timings, data in a
 * temporary directory. Members can be stopped, SIGKILLed and restarted on
 * their data to test failures.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import http from "node:http";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { Etcd3, type IOptions } from "etcd3";
import { ConsensusError } from "./errors";
import { ownConnections } from "./etcd-client";

/** Options of `startEtcdCluster`. */
export interface EtcdClusterOptions {
  /** The etcd binary (default: `etcd` on PATH, i.e. Debian's etcd-server). */
  binary?: string;
  /** How long a member may take to become healthy, per start or restart (default 20 s). */
  readyTimeoutMs?: number;
  /** How long a member may take to exit on SIGTERM before it is SIGKILLed (default 2 s). */
  stopGraceMs?: number;
}

/** One etcd process of a test cluster. */
export interface EtcdMember {
  readonly name: string;
  /** PID of the current process; undefined while the member is down. */
  readonly pid: number | undefined;
  readonly clientUrl: string;
  readonly peerUrl: string;
  readonly dataDir: string;
  /** SIGTERM, SIGKILL after the grace period; resolves once the process has exited. */
  stop(): Promise<void>;
  /** SIGKILL, as a crash or power loss would; resolves once the process has exited. */
  kill(): Promise<void>;
  /** Starts the member again on the same data directory and ports; resolves once it is healthy. */
  restart(): Promise<void>;
  /**
   * SIGSTOP: the process stays, its connections stay open, but nothing
   * answers, which is what a network partition looks like to its clients.
   */
  pause(): void;
  /** SIGCONT after `pause()`. */
  resume(): void;
}

/** A running test cluster; `stop()` it in `afterAll`. */
export interface EtcdCluster {
  readonly members: readonly EtcdMember[];
  /** Client URLs of all members. */
  readonly endpoints: readonly string[];
  /**
   * A new client, over all members unless `options.hosts` says otherwise,
   * with connections of its own (not shared with other clients). The cluster
   * closes it at `stop()`.
   */
  client(options?: Partial<IOptions>): Etcd3;
  /** Closes the clients, stops every member and removes the data. */
  stop(): Promise<void>;
}

/** Thrown when a member does not start or does not become healthy in time. */
export class EtcdStartError extends ConsensusError {
  constructor(
    message: string,
    /** The member exited because one of its ports was taken meanwhile: starting again on other ports may work. */
    readonly portTaken = false,
  ) {
    super(message);
  }
}

const DEFAULT_READY_TIMEOUT_MS = 20_000;
const DEFAULT_STOP_GRACE_MS = 2_000;
/** Poll interval of the readiness probe: a fresh member serves in ~100 ms with the timings below. */
const READY_POLL_MS = 20;
/** Starts of a cluster whose ports were taken before etcd could bind them. */
const START_ATTEMPTS = 3;
/** Bytes of a member's stderr kept to explain a failed start. */
const STDERR_TAIL = 4096;

/**
 * etcd3's watch reconnect delay for test clients. etcd3 arms a reconnect
 * timer (not unref'd) whenever a watch stream ends, even when its last
 * watcher was just cancelled, and its default exponential backoff can make
 * that seconds: long enough to keep jest from exiting after the tests.
 */
const quickWatchReconnect = { duration: 50, next: () => quickWatchReconnect };

/**
 * Processes still running, killed when the test process exits without
 * `stop()` (a crashed worker, a forgotten afterAll) so that no etcd outlives
 * the run.
 */
const live = new Set<ChildProcess>();
let exitHookInstalled = false;
function track(child: ChildProcess): void {
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.on("exit", () => {
      for (const c of live) c.kill("SIGKILL");
    });
  }
  live.add(child);
  child.once("exit", () => live.delete(child));
}

/**
 * Free loopback ports. All are held open until all are chosen, so that one
 * call never returns the same port twice; parallel jest workers get distinct
 * ports from the kernel.
 */
async function freePorts(n: number): Promise<number[]> {
  const servers: net.Server[] = [];
  try {
    for (let i = 0; i < n; i++) {
      const s = net.createServer();
      servers.push(s);
      await new Promise<void>((resolve, reject) => {
        s.once("error", reject);
        s.listen(0, "127.0.0.1", resolve);
      });
    }
    return servers.map((s) => (s.address() as net.AddressInfo).port);
  } finally {
    await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  }
}

/** Whether the member at `clientUrl` answers /health with true (it has a leader and serves reads). */
function healthy(clientUrl: string, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    // agent: false so that no keep-alive socket outlives the probe.
    const req = http.get(`${clientUrl}/health`, { agent: false, timeout: timeoutMs }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (body += chunk));
      res.on("end", () => {
        try {
          resolve(res.statusCode === 200 && JSON.parse(body).health === "true");
        } catch {
          resolve(false);
        }
      });
      res.on("error", () => resolve(false));
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve(false));
  });
}

function waitExit(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once("exit", () => resolve()));
}

class Member implements EtcdMember {
  private child: ChildProcess | undefined;
  private stderr = "";

  constructor(
    readonly name: string,
    readonly clientUrl: string,
    readonly peerUrl: string,
    readonly dataDir: string,
    private readonly flags: readonly string[],
    private readonly opts: Required<EtcdClusterOptions>,
  ) {}

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Spawns the process; `existing` when it restarts on its data. */
  spawn(existing: boolean): void {
    if (this.child !== undefined) throw new Error(`etcd member ${this.name} is already running`);
    const args = [...this.flags, "--initial-cluster-state", existing ? "existing" : "new"];
    const child = spawn(this.opts.binary, args, { stdio: ["ignore", "ignore", "pipe"] });
    this.stderr = "";
    child.stderr?.setEncoding("utf8");
    child.stderr?.on("data", (chunk: string) => {
      this.stderr = (this.stderr + chunk).slice(-STDERR_TAIL);
    });
    // Reported by awaitReady() as a start failure, instead of crashing the test process.
    child.on("error", (err) => (this.stderr += `\n${err.message}`));
    track(child);
    this.child = child;
  }

  /** Polls /health until the member serves, the process dies, or the deadline passes. */
  async awaitReady(): Promise<void> {
    const deadline = Date.now() + this.opts.readyTimeoutMs;
    for (;;) {
      const child = this.child;
      if (child === undefined || child.exitCode !== null || child.signalCode !== null) {
        throw new EtcdStartError(
          `etcd member ${this.name} exited during startup:\n${this.stderr}`,
          this.stderr.includes("address already in use"),
        );
      }
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new EtcdStartError(
          `etcd member ${this.name} not healthy after ${this.opts.readyTimeoutMs} ms:\n${this.stderr}`,
        );
      }
      if (await healthy(this.clientUrl, Math.min(left, 1000))) return;
      await sleep(READY_POLL_MS);
    }
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (child === undefined) return;
    const exited = waitExit(child);
    child.kill("SIGTERM");
    // A paused member would not act on SIGTERM before it is continued.
    child.kill("SIGCONT");
    const grace = new AbortController();
    const killer = sleep(this.opts.stopGraceMs, undefined, { signal: grace.signal }).then(
      () => child.kill("SIGKILL"),
      () => undefined,
    );
    await exited;
    grace.abort();
    await killer;
    this.child = undefined;
  }

  async kill(): Promise<void> {
    const child = this.child;
    if (child === undefined) return;
    const exited = waitExit(child);
    child.kill("SIGKILL");
    await exited;
    this.child = undefined;
  }

  async restart(): Promise<void> {
    this.spawn(true);
    await this.awaitReady();
  }

  pause(): void {
    this.running("pause").kill("SIGSTOP");
  }

  resume(): void {
    this.running("resume").kill("SIGCONT");
  }

  private running(what: string): ChildProcess {
    if (this.child === undefined) {
      throw new Error(`cannot ${what} etcd member ${this.name}: it is not running`);
    }
    return this.child;
  }
}

/**
 * Starts an `n`-member etcd cluster and waits until every member is healthy.
 *
 * @example
 * let cluster: EtcdCluster;
 * beforeAll(async () => (cluster = await startEtcdCluster(3)));
 * afterAll(() => cluster.stop());
 */
export async function startEtcdCluster(
  n: number,
  options?: EtcdClusterOptions,
): Promise<EtcdCluster> {
  if (!Number.isInteger(n) || n < 1) {
    throw new RangeError(`cluster size must be a positive integer, got ${n}`);
  }
  const opts: Required<EtcdClusterOptions> = {
    binary: options?.binary ?? "etcd",
    readyTimeoutMs: options?.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS,
    stopGraceMs: options?.stopGraceMs ?? DEFAULT_STOP_GRACE_MS,
  };
  for (let attempt = 1; ; attempt++) {
    try {
      return await launch(n, opts);
    } catch (err) {
      // A free port can be taken by another process between freePorts() and
      // etcd binding it; new ports fix that.
      if (!(err instanceof EtcdStartError && err.portTaken) || attempt === START_ATTEMPTS)
        throw err;
    }
  }
}

async function launch(n: number, opts: Required<EtcdClusterOptions>): Promise<EtcdCluster> {
  const root = await mkdtemp(join(tmpdir(), "etcd-cluster-"));
  const ports = await freePorts(2 * n);
  const names = Array.from({ length: n }, (_, i) => `m${i}`);
  const peerUrls = names.map((_, i) => `http://127.0.0.1:${ports[2 * i + 1]}`);
  const initialCluster = names.map((name, i) => `${name}=${peerUrls[i]}`).join(",");
  // A cluster token of its own, so that members of two test clusters can never join each other.
  const token = `test-${process.pid}-${ports[0]}`;
  const members = names.map((name, i) => {
    const clientUrl = `http://127.0.0.1:${ports[2 * i]}`;
    const dataDir = join(root, name);
    // prettier-ignore
    const flags = [
      "--name", name,
      "--data-dir", dataDir,
      "--listen-client-urls", clientUrl,
      "--advertise-client-urls", clientUrl,
      "--listen-peer-urls", peerUrls[i],
      "--initial-advertise-peer-urls", peerUrls[i],
      "--initial-cluster", initialCluster,
      "--initial-cluster-token", token,
      "--heartbeat-interval", "10",
      "--election-timeout", "100",
      "--logger", "zap",
      "--log-outputs", "stderr",
      "--log-level", "error",
    ];
    return new Member(name, clientUrl, peerUrls[i], dataDir, flags, opts);
  });
  const clients = new Set<Etcd3>();
  const endpoints = members.map((m) => m.clientUrl);
  let stopped = false;

  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    for (const c of clients) c.close();
    clients.clear();
    // One at a time: members stopped together lose quorum mid-shutdown and
    // then take seconds to exit on SIGTERM; one by one each takes ~20 ms.
    for (const m of members) await m.stop();
    await rm(root, { recursive: true, force: true });
  };

  try {
    for (const m of members) m.spawn(false);
    await Promise.all(members.map((m) => m.awaitReady()));
  } catch (err) {
    await stop();
    throw err;
  }

  return {
    members,
    endpoints,
    client(clientOptions?: Partial<IOptions>): Etcd3 {
      if (stopped) throw new Error("etcd test cluster is stopped");
      const c = new Etcd3({
        ...clientOptions,
        hosts: clientOptions?.hosts ?? [...endpoints],
        // grpc-js shares connections between clients by default, and with them
        // the reconnect backoff of a member killed earlier: a new client would
        // fail at once against a member that is back, tripping etcd3's circuit
        // breaker for 5 s. A pool per client makes a new client a new client.
        grpcOptions: { ...ownConnections, ...clientOptions?.grpcOptions },
        faultHandling: { watchBackoff: quickWatchReconnect, ...clientOptions?.faultHandling },
      });
      clients.add(c);
      return c;
    },
    stop,
  };
}
