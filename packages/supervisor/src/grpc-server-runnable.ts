/**
 * grpcServerRunnable: a gRPC server as a supervised runnable. Healthy once
 * it is bound and serving; on abort it stops accepting calls, lets running
 * ones finish for a grace period, then cancels them.
 */
import type { Server, ServerCredentials } from "@grpc/grpc-js";
import { SupervisorError } from "./errors";
import type { RunContext, Runnable } from "./types";

/** How {@link grpcServerRunnable} serves. */
export interface GrpcServerOptions {
  /**
   * Milliseconds running calls get to finish after abort before they are cancelled.
   * @default 5000
   */
  graceMs?: number;
  /**
   * Called with the bound port (useful with port 0).
   * @default none
   */
  onListening?: (port: number) => void;
}

/** The server could not bind its address. */
export class GrpcBindError extends SupervisorError {
  constructor(
    /** DN of the runnable concerned. */
    readonly dn: string,
    /** The address it could not bind. */
    readonly address: string,
    cause: Error,
  ) {
    super(`${dn}: cannot serve gRPC on ${address}: ${cause.message}`, { cause });
  }
}

/**
 * Serves `server` on `address` (`host:port`). A grpc-js Server cannot be
 * started again once shut down, so a runnable that must survive restarts
 * takes a factory that builds a fresh server for every run; a plain Server
 * serves one run only.
 */
export function grpcServerRunnable(
  server: Server | (() => Server),
  address: string,
  credentials: ServerCredentials,
  opts: GrpcServerOptions = {},
): Runnable {
  const { graceMs = 5000 } = opts;
  return async (ctx: RunContext) => {
    const s = typeof server === "function" ? server() : server;
    const port = await new Promise<number>((resolve, reject) =>
      s.bindAsync(address, credentials, (err, p) =>
        err ? reject(new GrpcBindError(ctx.dn, address, err)) : resolve(p),
      ),
    );
    ctx.logger.info(`serving gRPC on ${address} (port ${port})`);
    opts.onListening?.(port);
    ctx.healthy();
    await ctx.untilAborted();
    await new Promise<void>((resolve) => {
      const force = setTimeout(() => {
        ctx.logger.warn(`calls still running ${graceMs} ms after shutdown began; cancelling them`);
        s.forceShutdown();
        resolve();
      }, graceMs);
      s.tryShutdown(() => {
        clearTimeout(force);
        resolve();
      });
    });
  };
}
