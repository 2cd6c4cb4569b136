/**
 * The curator's gRPC listener. It is rebuilt on every change of leadership
 * (the leader serves more than a follower), on the same port: a new server
 * binds only once the previous one has shut down.
 */
import {
  Server,
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

export class Listener {
  private previous: Promise<void> = Promise.resolve();

  constructor(
    readonly address: string,
    private readonly credentials: ServerCredentials,
    private readonly logger: Logger,
  ) {}

  /**
   * Serves `services` until `signal` aborts, then shuts down; resolves once
   * shut down. `onServing` is called once the server accepts calls.
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

  private async run(
    services: readonly ServiceEntry[],
    signal: AbortSignal,
    role: string,
    onServing: () => void,
  ): Promise<void> {
    if (signal.aborted) return;
    const server = new Server(serverLimits());
    for (const [definition, implementation] of services)
      server.addService(definition, implementation);
    await new Promise<number>((resolve, reject) =>
      server.bindAsync(this.address, this.credentials, (err, port) =>
        err ? reject(err) : resolve(port),
      ),
    );
    this.logger.info(`serving as ${role} on ${this.address}`);
    onServing();
    await new Promise<void>((resolve) => {
      if (signal.aborted) return resolve();
      signal.addEventListener("abort", () => resolve(), { once: true });
    });
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
}
