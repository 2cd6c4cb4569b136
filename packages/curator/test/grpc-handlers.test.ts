/**
 * How the curator answers a handler's failure: its own errors with their
 * code, an etcd outage (the etcd client's unavailable / deadline exceeded)
 * as UNAVAILABLE so that clients retry — a rejoining node took INTERNAL as
 * the cluster disowning it (found by the chaos run: SIGKILL of the leader's
 * etcd while a node rejoined) — and anything else as INTERNAL.
 */
import { status } from "@grpc/grpc-js";
import { GRPCDeadlineExceededError, GRPCUnavailableError } from "etcd3";
import { createLogger } from "winston";
import { NotFoundError } from "../src/errors";
import { toGrpcError } from "../src/grpc-handlers";

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
    expect(answer.details).toMatch(/^consensus unavailable on this curator .*; retry$/);
  });

  it("answers anything else as INTERNAL, without its details", () => {
    expect(toGrpcError(new Error("secret"), logger, "M")).toEqual({
      code: status.INTERNAL,
      details: "internal error in M",
    });
  });
});
