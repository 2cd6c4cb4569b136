/**
 * How the curator answers a handler's failure: its own errors with their
 * code, an etcd outage (the etcd client's unavailable / deadline exceeded)
 * as UNAVAILABLE so that clients retry — a rejoining node took INTERNAL as
 * the cluster disowning it (found by the chaos run: SIGKILL of the leader's
 * etcd while a node rejoined), a membership change etcd kept refusing as
 * UNAVAILABLE with etcd's reason, and anything else as INTERNAL; and how a
 * handler learns that its caller is gone or about to give up (callSignal).
 */
import {
  credentials,
  Server,
  status,
  type sendUnaryData,
  type ServerUnaryCall,
  type ServiceError,
} from "@grpc/grpc-js";
import { MembershipRefusedError } from "@metropolis/consensus";
import { ClientClosedError, GRPCDeadlineExceededError, GRPCUnavailableError } from "etcd3";
import { createLogger } from "winston";
import { NotFoundError } from "../src/errors";
import { callSignal, toGrpcError } from "../src/grpc-handlers";
import { eventually } from "@metropolis/supervisor/testing";
import { bindInsecure, identity, WhoClient, whoService } from "./raw-services";

const logger = createLogger({ silent: true });

describe("toGrpcError", () => {
  it("answers a CuratorError with its code and message", () => {
    expect(toGrpcError(new NotFoundError("node x not found"), logger, "M")).toEqual({
      code: status.NOT_FOUND,
      details: "node x not found",
    });
  });

  it.each([
    ["unavailable", new GRPCUnavailableError("14 UNAVAILABLE: No connection established")],
    ["deadline exceeded", new GRPCDeadlineExceededError("4 DEADLINE_EXCEEDED")],
  ])("answers the etcd client's %s as UNAVAILABLE", (_name, e) => {
    const answer = toGrpcError(e, logger, "Curator.JoinNode");
    expect(answer.code).toBe(status.UNAVAILABLE);
    expect(answer?.details).toMatch(/^consensus unavailable on this curator .*; retry$/);
  });

  it("answers a membership change etcd kept refusing as UNAVAILABLE, with etcd's reason", () => {
    const refused = new MembershipRefusedError(
      "adding n1 (https://127.0.0.1:7834) as a learner",
      "still refused after 60000 ms",
      60_012,
      new Error("etcdserver: unhealthy cluster"),
    );
    const answer = toGrpcError(refused, logger, "Management.UpdateNodeRoles");
    expect(answer.code).toBe(status.UNAVAILABLE);
    expect(answer?.details).toMatch(/as a learner: still refused .*unhealthy cluster.*; retry$/);
  });

  it.each([
    ["itself", new ClientClosedError("Cluster")],
    [
      "as the cause of another error",
      new Error("listing members", { cause: new ClientClosedError("Cluster") }),
    ],
  ])("answers the etcd client closed under a call (%s) as UNAVAILABLE", (_name, e) => {
    expect(toGrpcError(e, logger, "Management.UpdateNodeRoles")).toEqual({
      code: status.UNAVAILABLE,
      details: "the curator is shutting down; retry",
    });
  });

  it("answers anything else as INTERNAL, without its details", () => {
    expect(toGrpcError(new Error("secret"), logger, "M")).toEqual({
      code: status.INTERNAL,
      details: "internal error in M",
    });
  });
});

describe("callSignal", () => {
  const host = "127.0.43.7";
  let server: Server;
  let client: InstanceType<typeof WhoClient>;
  /** Each call's signal, as the handler got it. */
  let signals: AbortSignal[];

  beforeEach(async () => {
    signals = [];
    server = new Server();
    // A handler that works until its signal says to stop, then answers why.
    server.addService(whoService, {
      who: (call: ServerUnaryCall<Buffer, Buffer>, done: sendUnaryData<Buffer>) => {
        const signal = callSignal(call);
        signals.push(signal);
        signal.addEventListener("abort", () =>
          done({ code: status.UNAVAILABLE, details: `gave up: ${String(signal.reason)}` }),
        );
      },
    });
    const port = await bindInsecure(server, host);
    client = new WhoClient(`${host}:${port}`, credentials.createInsecure());
  });
  afterEach(() => {
    client.close();
    server.forceShutdown();
  });

  /** Asks with `deadline`; resolves with the answer's error status (the handler never succeeds). */
  const ask = (deadline: number) =>
    new Promise<ServiceError | null>((resolve) =>
      client.makeUnaryRequest(
        "/test.Who/Who",
        identity,
        identity,
        Buffer.alloc(0),
        { deadline },
        (e: ServiceError | null) => resolve(e),
      ),
    );

  it("aborts a second before the caller's deadline, so the handler's answer still reaches it", async () => {
    const started = Date.now();
    const answer = await ask(started + 3000);
    expect(answer?.code).toBe(status.UNAVAILABLE);
    expect(answer?.details).toMatch(/^gave up: TimeoutError/);
    // 1 s of margin: answered before the caller's 3 s, not at them.
    expect(Date.now() - started).toBeLessThan(2900);
  });

  it("aborts when the caller cancels", async () => {
    const call = client.makeUnaryRequest(
      "/test.Who/Who",
      identity,
      identity,
      Buffer.alloc(0),
      { deadline: Date.now() + 60_000 },
      () => undefined,
    );
    await eventually(() => signals.length === 1, "the call reached the handler");
    call.cancel();
    await eventually(() => signals[0].aborted, "the handler's signal aborted");
    expect(String(signals[0].reason)).toMatch(/the caller gave up/);
  });
});
