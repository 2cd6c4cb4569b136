/**
 * A grpc-js server as a supervised child. It is healthy once bound; when the
 * tree stops it shuts down gracefully, then forcibly after `graceMs`. The
 * factory builds a fresh Server for every run, since a grpc-js Server cannot
 * be started again once shut down.
 */
import { Server, ServerCredentials } from "@grpc/grpc-js";
import { supervise } from "@metropolis/supervisor";
import { GrpcBindError, grpcServerRunnable } from "@metropolis/supervisor/grpc";

function makeServer(): Server {
  const server = new Server();
  // server.addService(MyService, handlers);
  return server;
}

const sup = supervise(async (ctx) => {
  ctx.run(
    "api",
    grpcServerRunnable(makeServer, "127.0.0.1:0", ServerCredentials.createInsecure(), {
      graceMs: 2000,
      onListening: (port) => console.log(`serving on port ${port}`),
    }),
  );
  ctx.healthy();
  await ctx.untilAborted();
});
sup.onTransition((t) => {
  if (t.error instanceof GrpcBindError) console.error(`cannot bind ${t.error.address}`);
});
setTimeout(() => void sup.stop(), 1000).unref();
