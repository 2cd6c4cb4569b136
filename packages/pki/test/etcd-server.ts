/**
 * A real, single-member etcd for one test file: started on free 127.0.0.1
 * ports in a temporary data directory, ready once a client read succeeds,
 * and stopped by PID (SIGTERM, then SIGKILL after a grace period) with its
 * directory removed.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { noop } from "cockatiel";
import { Etcd3 } from "etcd3";

const READY_DEADLINE_MS = 20_000;
const STOP_GRACE_MS = 5_000;
const START_ATTEMPTS = 3;

/** A running etcd and the clients made for it. */
export interface EtcdServer {
  /** The client URL, http://127.0.0.1:<port>. */
  readonly endpoint: string;
  /** A new client (no retries, no circuit breaker); closed by stop(). */
  client(): Etcd3;
  /** Closes all clients, stops the process by PID and removes the data directory. */
  stop(): Promise<void>;
}

/** Starts etcd and resolves once it serves reads. */
export async function startEtcd(): Promise<EtcdServer> {
  let lastError: unknown;
  // A free port can be taken by someone else between probing and etcd's
  // bind; etcd then exits, and another pair of ports is tried.
  for (let attempt = 0; attempt < START_ATTEMPTS; attempt++) {
    try {
      return await startOnce();
    } catch (error) {
      lastError = error;
    }
  }
  throw lastError;
}

async function startOnce(): Promise<EtcdServer> {
  const [clientPort, peerPort] = await freePorts(2);
  const dataDir = await mkdtemp(join(tmpdir(), "pki-etcd-"));
  const endpoint = `http://127.0.0.1:${clientPort}`;
  const peer = `http://127.0.0.1:${peerPort}`;
  const child = spawn(
    "etcd",
    [
      "--name=t",
      `--data-dir=${dataDir}`,
      `--listen-client-urls=${endpoint}`,
      `--advertise-client-urls=${endpoint}`,
      `--listen-peer-urls=${peer}`,
      `--initial-advertise-peer-urls=${peer}`,
      `--initial-cluster=t=${peer}`,
      "--heartbeat-interval=10",
      "--election-timeout=100",
      "--log-level=error",
    ],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  let stderr = "";
  child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
    stderr = (stderr + chunk).slice(-4000);
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const startupFailed = new Promise<never>((_, reject) => {
    child.once("error", reject);
    child.once("exit", (code, signal) =>
      reject(new Error(`etcd exited during startup (${code ?? signal}): ${stderr}`)),
    );
  });
  // Only meaningful until ready; later exits (our own stop) must not surface
  // as unhandled rejections.
  startupFailed.catch(() => undefined);

  const clients: Etcd3[] = [];
  const server: EtcdServer = {
    endpoint,
    client() {
      const client = new Etcd3({
        hosts: endpoint,
        faultHandling: { host: () => noop, global: noop },
      });
      clients.push(client);
      return client;
    },
    async stop() {
      for (const client of clients.splice(0)) client.close();
      await stopProcess(child, exited);
      await rm(dataDir, { recursive: true, force: true });
    },
  };

  const startup = new AbortController();
  try {
    await Promise.race([waitReady(server, () => stderr, startup.signal), startupFailed]);
  } catch (error) {
    startup.abort();
    await server.stop();
    throw error;
  }
  return server;
}

async function waitReady(
  server: EtcdServer,
  stderr: () => string,
  abandoned: AbortSignal,
): Promise<void> {
  const probe = server.client();
  const deadline = Date.now() + READY_DEADLINE_MS;
  let lastError: unknown;
  while (Date.now() < deadline && !abandoned.aborted) {
    try {
      await probe
        .get("readiness-probe")
        .options({ deadline: Date.now() + 1000 })
        .string();
      return;
    } catch (error) {
      lastError = error;
    }
    // Poll interval, not a wait for a condition: the loop ends on success.
    await delay(20);
  }
  if (abandoned.aborted) return;
  throw new Error(
    `etcd at ${server.endpoint} not ready after ${READY_DEADLINE_MS} ms: ${String(lastError)}; ${stderr()}`,
  );
}

async function stopProcess(child: ChildProcess, exited: Promise<void>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
  process.kill(child.pid, "SIGTERM");
  let timer: NodeJS.Timeout | undefined;
  const graceOver = new Promise<"timeout">((resolve) => {
    timer = setTimeout(() => resolve("timeout"), STOP_GRACE_MS);
  });
  const outcome = await Promise.race([exited.then(() => "exited" as const), graceOver]);
  clearTimeout(timer);
  if (outcome === "timeout") {
    process.kill(child.pid, "SIGKILL");
    await exited;
  }
}

/** `count` distinct ports that were free on 127.0.0.1 a moment ago. */
async function freePorts(count: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<ReturnType<typeof createServer>>((resolve, reject) => {
          const server = createServer();
          server.once("error", reject);
          server.listen(0, "127.0.0.1", () => resolve(server));
        }),
    ),
  );
  // All are held open until each port is read, so the ports are distinct.
  const ports = servers.map((server) => (server.address() as AddressInfo).port);
  await Promise.all(
    servers.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))),
  );
  return ports;
}
