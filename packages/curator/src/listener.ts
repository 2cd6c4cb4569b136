/**
 * The curator's gRPC listener: one listening TCP socket and one grpc-js
 * server for a curator's whole run, serving the services of one role after
 * another (a follower's, then a leader's, …) through a call router.
 *
 *   TCP :port ──accept──▶ net.Server (backlog 4096) ──admission──inject──▶ grpc-js server
 *                                                          │ every method: CallRouter
 *                                                          ▼
 *                                   the services of the role serving now (call-router.ts)
 *
 * Why not grpc-js's own `bindAsync`: it listens with Node's default backlog
 * (511), and a whole cluster's nodes dial a new leader at once after a
 * failover — the scale simulator overflowed that queue thousands of times
 * (nstat ListenOverflows), every dropped handshake retried by TCP after 1,
 * 3, 7 s. And why one server rather than one per role: shutting a server
 * down closes its connections, and the nodes' connections to a follower are
 * kept precisely so that, when it becomes the leader, they need no new TLS
 * handshake (CuratorConnection's `standby`). A call that arrives between two
 * roles is held for the next one (call-router.ts). Accepted connections are
 * admitted a few per turn of the event loop (connection-admission.ts), so
 * that a cluster dialling at once cannot starve what the curator already serves.
 */
import { createServer, type Server as NetServer, type Socket } from "node:net";
import { Server, type ConnectionInjector, type ServerCredentials } from "@grpc/grpc-js";
import type { Logger } from "@metropolis/supervisor";
import { CallRouter, type RunPolicy, type ServiceEntry } from "./call-router";
import { ConnectionAdmission } from "./connection-admission";
import { serverLimits } from "./server-limits";

/**
 * Pending connections the kernel queues for the socket (capped by
 * net.core.somaxconn): room for a cluster's nodes dialling a new leader at once.
 */
export const listenBacklog = 4096;

/** The host and port of `host:port` or `[v6]:port`. */
function splitAddress(address: string): { host: string; port: number } {
  const colon = address.lastIndexOf(":");
  const host = address.slice(0, colon).replace(/^\[(.*)\]$/, "$1");
  const port = Number(address.slice(colon + 1));
  if (colon <= 0 || !Number.isInteger(port) || port < 0 || port > 65535)
    throw new RangeError(`listener address ${JSON.stringify(address)} is not host:port`);
  return { host, port };
}

export class Listener {
  private previous: Promise<void> = Promise.resolve();
  private socket: NetServer | undefined;
  /** The grpc-js server, its way in for accepted connections, and the router of its calls. */
  private grpc: { server: Server; injector: ConnectionInjector; router: CallRouter } | undefined;
  /** Where accepted connections wait for their turn (connection-admission.ts). */
  private admission: ConnectionAdmission | undefined;
  /** Every accepted connection still open, whoever holds it now (see {@link close}). */
  private readonly connections = new Set<Socket>();

  constructor(
    readonly address: string,
    private readonly credentials: ServerCredentials,
    private readonly logger: Logger,
  ) {}

  /** Accepted connections still open: waiting for admission, in their TLS handshake, or serving. */
  get connectionCount(): number {
    return this.connections.size;
  }

  /**
   * Serves `services` until `signal` aborts, then ends their calls (see
   * call-router.ts); resolves once they have ended. `onServing` is called
   * once the services take calls; `policy` says how calls of what they do
   * not serve are answered (call-router.ts). The port is opened by the
   * first call and stays open until {@link close}.
   */
  serve(
    services: readonly ServiceEntry[],
    signal: AbortSignal,
    role: string,
    onServing: () => void = () => undefined,
    policy: RunPolicy = {},
  ): Promise<void> {
    const run = this.previous.then(() => this.run(services, signal, role, onServing, policy));
    this.previous = run.catch(() => undefined);
    return run;
  }

  /**
   * Once the last {@link serve} has ended, answers the calls held for a next
   * one (UNAVAILABLE), closes every connection and the port; resolves once
   * the port is closed.
   *
   * Every accepted connection is destroyed here, not only the sessions
   * grpc-js knows of: a connection still in its TLS handshake has no session
   * yet (and gets one after grpc-js shut down, which nothing would close),
   * and one that never sent a byte waits for TLS's 120 s handshake timeout.
   * The port's close waits for all of them, so one idle client would keep a
   * stopping curator from ending — a node's control plane that cannot
   * restart until its curator has ended (seen as a curator still running at
   * a node's stop in the enrolment tests).
   */
  async close(): Promise<void> {
    await this.previous;
    this.admission?.close();
    this.admission = undefined;
    const grpc = this.grpc;
    this.grpc = undefined;
    if (grpc) {
      grpc.router.close();
      grpc.server.forceShutdown();
    }
    const socket = this.socket;
    this.socket = undefined;
    if (!socket) return;
    const closed = new Promise<void>((resolve) => socket.close(() => resolve()));
    for (const connection of this.connections) connection.destroy();
    this.connections.clear();
    await closed;
  }

  private async run(
    services: readonly ServiceEntry[],
    signal: AbortSignal,
    role: string,
    onServing: () => void,
    policy: RunPolicy,
  ): Promise<void> {
    if (signal.aborted) return;
    const { router } = await this.listen();
    const end = router.serve(services, policy);
    this.logger.info(`serving as ${role} on ${this.address}`);
    onServing();
    await new Promise<void>((resolve) => {
      if (signal.aborted) return resolve();
      signal.addEventListener("abort", () => resolve(), { once: true });
    });
    await end();
  }

  /** Opens the port and makes the grpc-js server, once. */
  private async listen(): Promise<NonNullable<Listener["grpc"]>> {
    if (this.grpc) return this.grpc;
    const server = new Server(serverLimits());
    const grpc = {
      server,
      injector: server.createConnectionInjector(this.credentials),
      router: new CallRouter(server),
    };
    const { host, port } = splitAddress(this.address);
    // Accepted unread (paused): a connection's handshake starts when it is admitted.
    const admission = new ConnectionAdmission((connection) => {
      // Reading starts now, in the same turn as TLS takes the socket over.
      connection.resume();
      grpc.injector.injectConnection(connection);
    });
    const socket = createServer({ noDelay: true, pauseOnConnect: true }, (connection) => {
      this.connections.add(connection);
      connection.once("close", () => this.connections.delete(connection));
      admission.offer(connection);
    });
    await new Promise<void>((resolve, reject) => {
      socket.once("error", reject);
      socket.listen({ host, port, backlog: listenBacklog }, () => {
        socket.off("error", reject);
        resolve();
      });
    });
    socket.on("error", (e) => this.logger.error(`curator listener on ${this.address}: ${e}`));
    this.socket = socket;
    this.admission = admission;
    this.grpc = grpc;
    return grpc;
  }
}
