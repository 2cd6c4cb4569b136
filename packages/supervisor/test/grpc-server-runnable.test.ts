import * as grpc from "@grpc/grpc-js";
import { GrpcBindError, grpcServerRunnable } from "@metropolis/supervisor/grpc";
import { testHarness, type TestHarness } from "@metropolis/supervisor/testing";
import { deferred, serve } from "./helpers";

let h: TestHarness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

// A one-method service with raw byte messages: enough to prove the server serves.
const echoService: grpc.ServiceDefinition = {
  echo: {
    path: "/test.Echo/Echo",
    requestStream: false,
    responseStream: false,
    requestSerialize: (b: Buffer) => b,
    requestDeserialize: (b: Buffer) => b,
    responseSerialize: (b: Buffer) => b,
    responseDeserialize: (b: Buffer) => b,
  },
};
const EchoClient = grpc.makeGenericClientConstructor(echoService, "Echo");

function echoServer(): grpc.Server {
  const server = new grpc.Server();
  server.addService(echoService, {
    echo: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) =>
      cb(null, call.request),
  });
  return server;
}

function echo(port: number, text: string): Promise<string> {
  const client = new EchoClient(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  return new Promise<string>((resolve, reject) =>
    (
      client as unknown as {
        echo: (b: Buffer, o: object, cb: (e: Error | null, r?: Buffer) => void) => void;
      }
    ).echo(
      Buffer.from(text),
      { deadline: Date.now() + 2000 },
      (err, res) => (client.close(), err ? reject(err) : resolve(res!.toString())),
    ),
  );
}

describe("grpcServerRunnable", () => {
  it("serves once healthy and shuts down on abort", async () => {
    const listening = deferred<number>();
    h = testHarness(async (ctx) => {
      ctx.run(
        "api",
        grpcServerRunnable(echoServer, "127.0.0.1:0", grpc.ServerCredentials.createInsecure(), {
          onListening: listening.resolve,
        }),
      );
      await serve(ctx);
    });
    await h.waitFor("root.api", "healthy");
    const port = await listening.promise;
    await expect(echo(port, "hello")).resolves.toBe("hello");
    await h.supervisor.stop();
    expect(h.supervisor.tree().find((n) => n.dn === "root.api")?.state).toBe("canceled");
    await expect(echo(port, "anyone?")).rejects.toMatchObject({ code: grpc.status.UNAVAILABLE });
  });

  it("serves again after a restart when given a factory", async () => {
    const ports: number[] = [];
    const fail = deferred();
    let triggers = 0;
    h = testHarness(
      async (ctx) => {
        ctx.runGroup({
          api: grpcServerRunnable(
            echoServer,
            "127.0.0.1:0",
            grpc.ServerCredentials.createInsecure(),
            {
              onListening: (p) => ports.push(p),
            },
          ),
          trigger: async (c) => {
            if (++triggers > 1) return serve(c);
            c.healthy();
            await fail.promise;
            throw new Error("sibling failure");
          },
        });
        await serve(ctx);
      },
      { expectDeath: (dn) => dn === "root.trigger", backoff: { initialMs: 0 } },
    );
    await h.waitFor("root.api", "healthy");
    const back = h.nextTransition((t) => t.dn === "root.api" && t.to === "healthy");
    fail.resolve();
    await back;
    expect(ports).toHaveLength(2);
    await expect(echo(ports[1], "again")).resolves.toBe("again");
  });

  it("fails clearly when it cannot bind", async () => {
    // grpc-js also prints the bind error itself; the test asserts on ours.
    grpc.setLogVerbosity(grpc.logVerbosity.NONE);
    h = testHarness(
      async (ctx) => {
        ctx.run(
          "api",
          grpcServerRunnable(echoServer, "203.0.113.1:1", grpc.ServerCredentials.createInsecure()),
        );
        await serve(ctx);
      },
      { expectDeath: (dn) => dn === "root.api" },
    );
    const death = await h.nextTransition((t) => t.dn === "root.api" && t.to === "dead");
    expect(death.error).toBeInstanceOf(GrpcBindError);
    expect(death.error?.message).toMatch(/^root\.api: cannot serve gRPC on 203\.0\.113\.1:1: /);
  });
});
