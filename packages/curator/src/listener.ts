/**
 * The curator's gRPC listener: one listening TCP socket for a curator's
 * whole run, and a grpc-js server per leadership state (the leader serves
 * more than a follower) that takes its connections through a connection
 * injector.
 *
 *   TCP :port ──accept──▶ net.Server (backlog 4096) ──inject──▶ grpc-js server (follower)
 *                                      │ held while none serves      then (leader)
 *
 * Why not grpc-js's own `bindAsync`: it listens with Node's default backlog
 * (511), and a whole cluster's nodes dial a new leader at once after a
 * failover — the scale simulator overflowed that queue thousands of times
 * (nstat ListenOverflows), every dropped handshake retried by TCP after 1,
 * 3, 7 s. And a server bound per state closes the port between the follower's
 * server and the leader's, the moment every node dials it: here the port
 * stays open, and a connection that arrives while neither serves waits (up
 * to {@link maxHeldConnections}) for the next one.
 */
import { createServer, type Server as NetServer, type Socket } from "node:net";
import {
  Server,
  type ConnectionInjector,
  type ServerCredentials,
  type ServiceDefinition,
  type UntypedServiceImplementation,
} from "@grpc/grpc-js";
import type { Logger } from "@metropolis/supervisor";
import { serverLimits } from "./server-limits";

/** A service definition with its implementation. */
export type ServiceEntry = readonly [ServiceDefinition, UntypedServiceImplementation];

/** Time running calls (watches, heartbeats) get to finish when the listener changes. */
const shutdownGraceMs = 500;

/**
 * Pending connections the kernel queues for the socket (capped by
 * net.core.somaxconn): room for a cluster's nodes dialling a new leader at once.
 */
export const listenBacklog = 4096;

/** Connections held while no server serves; beyond it, the oldest are closed. */
export const maxHeldConnections = 4096;

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
  /** The server connections go to now, while one serves. */
  private serving: ConnectionInjector | undefined;
  /** Connections that arrived while no server served, oldest first. */
  private readonly held = new Set<Socket>();

  constructor(
    readonly address: string,
    private readonly credentials: ServerCredentials,
    private readonly logger: Logger,
  ) {}

  /**
   * Serves `services` until `signal` aborts, then shuts down; resolves once
   * shut down. `onServing` is called once the server accepts calls. The
   * port is opened by the first call and stays open until {@link close}.
   */
  serve(
    services: readonly ServiceEntry[],
    signal: AbortSignal,
    role: string,
    onServing: () => void = () => undefined,
  ): Promise<void> {
    const run = this.previous.then(() => this.run(services, signal, role, onServing));
    this.previous = run.catch(() => undefined);
    return run;
  }

  /**
   * Once the last {@link serve} has shut down, closes the port and every
   * connection held; resolves once the port is closed.
   */
  async close(): Promise<void> {
    await this.previous;
    for (const socket of this.held) socket.destroy();
    this.held.clear();
    const socket = this.socket;
    this.socket = undefined;
    if (socket) await new Promise<void>((resolve) => socket.close(() => resolve()));
  }

  private async run(
    services: readonly ServiceEntry[],
    signal: AbortSignal,
    role: string,
    onServing: () => void,
  ): Promise<void> {
    if (signal.aborted) return;
    await this.listen();
    const server = new Server(serverLimits());
    for (const [definition, implementation] of services)
      server.addService(definition, implementation);
    const injector = server.createConnectionInjector(this.credentials);
    this.serving = injector;
    for (const socket of this.held) this.inject(socket);
    this.held.clear();
    this.logger.info(`serving as ${role} on ${this.address}`);
    onServing();
    await new Promise<void>((resolve) => {
      if (signal.aborted) return resolve();
      signal.addEventListener("abort", () => resolve(), { once: true });
    });
    if (this.serving === injector) this.serving = undefined;
    await new Promise<void>((resolve) => {
      const force = setTimeout(() => {
        server.forceShutdown();
        resolve();
      }, shutdownGraceMs);
      server.tryShutdown(() => {
        clearTimeout(force);
        resolve();
      });
    });
  }

  /** Opens the port, once. */
  private async listen(): Promise<void> {
    if (this.socket) return;
    const { host, port } = splitAddress(this.address);
    const socket = createServer({ noDelay: true }, (connection) => this.accept(connection));
    this.socket = socket;
    await new Promise<void>((resolve, reject) => {
      socket.once("error", reject);
      socket.listen({ host, port, backlog: listenBacklog }, () => {
        socket.off("error", reject);
        resolve();
      });
    }).catch((e: unknown) => {
      this.socket = undefined;
      throw e;
    });
    socket.on("error", (e) => this.logger.error(`curator listener on ${this.address}: ${e}`));
  }

  private accept(connection: Socket): void {
    if (this.serving) {
      this.inject(connection);
      return;
    }
    this.held.add(connection);
    // A held connection's reset must not be an unhandled 'error' event.
    connection.on("error", () => undefined);
    connection.once("close", () => this.held.delete(connection));
    if (this.held.size > maxHeldConnections) {
      const [oldest] = this.held;
      oldest.destroy();
      this.held.delete(oldest);
    }
  }

  private inject(connection: Socket): void {
    if (connection.destroyed) return;
    this.serving?.injectConnection(connection);
  }
}
