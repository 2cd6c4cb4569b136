/**
 * The retry policy of enrolment calls: which failures mean "the cluster
 * cannot be reached right now" (retried for ever) and which are the
 * cluster's answer (final: the node stops, or gives up on its cluster).
 */
import { Metadata, status, type ServiceError } from "@grpc/grpc-js";
import { NoLeaderError } from "@metropolis/curator";
import { isUnreachable } from "../src/cluster-dial";

function grpcError(code: status, details: string): ServiceError {
  return Object.assign(new Error(`${code} ${status[code]}: ${details}`), {
    code,
    details,
    metadata: new Metadata(),
  });
}

describe("isUnreachable", () => {
  it.each([
    ["UNAVAILABLE", status.UNAVAILABLE, "No connection established"],
    ["DEADLINE_EXCEEDED", status.DEADLINE_EXCEEDED, "Deadline exceeded"],
    ["UNIMPLEMENTED", status.UNIMPLEMENTED, "a follower answered"],
    // Found by the chaos run: a channel closed under a JoinNode call while the
    // leader changed made a restarted node give up on its cluster.
    ["CANCELLED", status.CANCELLED, "Call cancelled"],
  ])("retries %s (%s)", (_name, code, details) => {
    expect(isUnreachable(grpcError(code, details))).toBe(true);
  });

  it.each([
    ["PERMISSION_DENIED", status.PERMISSION_DENIED, "wrong ticket"],
    ["NOT_FOUND", status.NOT_FOUND, "unknown node"],
    ["FAILED_PRECONDITION", status.FAILED_PRECONDITION, "node is decommissioned"],
    ["INVALID_ARGUMENT", status.INVALID_ARGUMENT, "label too long"],
    ["ABORTED", status.ABORTED, "conflict"],
  ])("takes %s (%s) as the cluster's answer", (_name, code, details) => {
    expect(isUnreachable(grpcError(code, details))).toBe(false);
  });

  it("never retries a certificate the node's CA does not verify", () => {
    const forged = grpcError(status.UNAVAILABLE, "unable to verify the first certificate");
    expect(isUnreachable(forged)).toBe(false);
  });

  it("retries when no curator names a leader", () => {
    const noLeader = new NoLeaderError(
      [],
      grpcError(status.DEADLINE_EXCEEDED, "Deadline exceeded"),
    );
    expect(isUnreachable(noLeader)).toBe(true);
  });
});
