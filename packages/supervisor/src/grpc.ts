/**
 * `@metropolis/supervisor/grpc`: a grpc-js server as a supervised runnable.
 * Needs the optional peer dependency `@grpc/grpc-js` (v1), whose types it
 * names; it loads nothing of it at run time.
 *
 * @example
 * ```ts
 * import { Server, ServerCredentials } from "@grpc/grpc-js";
 * import { grpcServerRunnable } from "@metropolis/supervisor/grpc";
 *
 * ctx.run(
 *   "api",
 *   grpcServerRunnable(() => makeServer(), "127.0.0.1:0", ServerCredentials.createInsecure()),
 * );
 * ```
 *
 * @module
 */
export { grpcServerRunnable, GrpcBindError, type GrpcServerOptions } from "./grpc-server-runnable";
