/**
 * Scoped access: the one static table of which role may call which method,
 * as Talos's `os:reader`, `os:operator`, `os:etcd:backup` (and `os:admin`,
 * which here is the owner).
 *
 * | role       | may call                                                               |
 * | ---------- | ---------------------------------------------------------------------- |
 * | `owner`    | everything the owner may call (the owner certificate, CN=owner)        |
 * | `operator` | the reader's methods, plus ApproveNode, UpdateNodeLabels, Reboot       |
 * | `reader`   | read-only: listings, describe, tree, reports, logs, metrics            |
 * | `backup`   | Management.BackupCluster only                                          |
 *
 * A role is what the cluster CA signed into a credential's certificate (the
 * access role extension, @metropolis/pki's access-role-extension.ts), and
 * nothing else: identity.ts classifies such a certificate as a `scoped`
 * caller only after verifying it against the CA, within its validity, and
 * not revoked. Every endpoint the owner can call checks its callers with
 * {@link requireAccess} and the method's key: the curator's Management,
 * Access, the nodes' Debug, NodeManagement and metrics endpoint.
 *
 * Fail closed: a method missing from {@link accessTable} is the owner's
 * alone (test/access-roles.test.ts asserts every method of every service is
 * in the table or in {@link notPersonMethods}, so a new RPC is classified on
 * purpose).
 */
import { PermissionDeniedError, UnauthenticatedError } from "./errors";
import type { Caller } from "./identity";

/** The roles a scoped credential may bear. The owner is no role: it may call everything. */
export const accessRoles = ["reader", "operator", "backup"] as const;

/** A role a scoped credential may bear. */
export type AccessRole = (typeof accessRoles)[number];

/** Whether `value` names an {@link AccessRole}. */
export function isAccessRole(value: string): value is AccessRole {
  return accessRoles.some((role) => role === value);
}

/** The key of the metrics endpoint (HTTP, not gRPC) in {@link accessTable}. */
export const metricsEndpointKey = "Metrics.Scrape";

const read: readonly AccessRole[] = ["reader", "operator"];
const operate: readonly AccessRole[] = ["operator"];
const backup: readonly AccessRole[] = ["backup"];
const ownerOnly: readonly AccessRole[] = [];

/**
 * Every method a person's credential may be presented to, by key
 * (`Service.Method`, as @metropolis/curator/testing's grpcMethods names
 * them), with the roles that may call it besides the owner. An empty list:
 * the owner only.
 */
export const accessTable: Readonly<Record<string, readonly AccessRole[]>> = {
  // The curator's Management service.
  "Management.GetClusterInfo": read,
  "Management.GetNodes": read,
  "Management.WatchNodes": read,
  "Management.GetClusterConsensus": read,
  "Management.WatchClusterConsensus": read,
  "Management.GetConsensusAlarms": read,
  "Management.CheckNodeMaintenance": read,
  "Management.GetClusterHealth": read,
  "Management.ApproveNode": operate,
  "Management.UpdateNodeLabels": operate,
  "Management.BackupCluster": backup,
  "Management.GetRegisterTicket": ownerOnly,
  "Management.UpdateNodeRoles": ownerOnly,
  "Management.DeleteNode": ownerOnly,
  "Management.RotateClusterSecretsKey": ownerOnly,
  "Management.ConfigureCluster": ownerOnly,
  "Management.DecommissionNode": ownerOnly,
  "Management.RemoveConsensusMember": ownerOnly,
  "Management.MoveConsensusLeader": ownerOnly,
  "Management.DefragmentConsensus": ownerOnly,
  "Management.DisarmConsensusAlarm": ownerOnly,
  // The curator's Access service: issuing credentials is the owner's alone.
  "Access.IssueAccess": ownerOnly,
  "Access.ListAccess": ownerOnly,
  "Access.RevokeAccess": ownerOnly,
  // Every node's Debug service (nodes may call it too: debug-service.ts).
  "Debug.GetLogs": read,
  "Debug.GetSupervisionTree": read,
  "Debug.GetCondition": read,
  "Debug.WatchSupervisionTree": read,
  "Debug.GetSupervisorReports": read,
  // Every node's NodeManagement service.
  "NodeManagement.Logs": read,
  "NodeManagement.Reboot": operate,
  "NodeManagement.PowerOff": ownerOnly,
  "NodeManagement.DefragmentMember": ownerOnly,
  // Every node's metrics endpoint over mutual TLS (HTTP GET /metrics, /discovery, /etcd).
  [metricsEndpointKey]: read,
};

/**
 * Methods no person's credential is for, each with checks of its own: the
 * nodes' Curator service, the anonymous CuratorLocal, and AAA's Escrow (the
 * owner key's self-signed certificate). A scoped caller is refused there
 * like any caller those checks do not expect.
 */
export const notPersonMethods: ReadonlySet<string> = new Set([
  "AAA.Escrow",
  "Curator.CommitNode",
  "Curator.GetConsensusStatus",
  "Curator.Heartbeat",
  "Curator.JoinNode",
  "Curator.RegisterNode",
  "Curator.UpdateNodeStatus",
  "Curator.Watch",
  "Curator.WatchRevocations",
  "CuratorLocal.GetCACertificate",
  "CuratorLocal.GetCurrentLeader",
]);

/** The roles that may call `method` besides the owner (none for a method not in the table). */
export function rolesFor(method: string): readonly AccessRole[] {
  return Object.hasOwn(accessTable, method) ? (accessTable[method] ?? ownerOnly) : ownerOnly;
}

/** Whether `role` may call `method` (the key `Service.Method`). */
export function mayCall(role: AccessRole, method: string): boolean {
  return rolesFor(method).includes(role);
}

/** "the owner", "the operator role or the owner", …: who may call `method`, for messages. */
export function allowedCallers(method: string): string {
  const roles = rolesFor(method);
  return roles.length === 0 ? "the owner only" : `the ${roles.join(" or ")} role or the owner`;
}

/**
 * The key of a gRPC method from its path: `/metropolis.proto.api.Management/GetNodes`
 * → `Management.GetNodes`; undefined for a path that is not one.
 */
export function methodKey(path: string): string | undefined {
  const match = /^\/(?:\w+\.)*(\w+)\/(\w+)$/.exec(path);
  return match ? `${match[1]}.${match[2]}` : undefined;
}

/**
 * Refuses `caller` unless it may call `method` (`Service.Method`): the owner
 * may call everything, a scoped credential what {@link accessTable} grants
 * its role. Anonymous callers are UNAUTHENTICATED; every other caller
 * (a node, a registering node, a scoped credential without the role) is
 * PERMISSION_DENIED, with a message naming the role and the method. A
 * service that also lets nodes in (Debug, metrics) lets them in before
 * asking this.
 */
export function requireAccess(caller: Caller, method: string): void {
  switch (caller.kind) {
    case "owner":
      return;
    case "scoped":
      if (mayCall(caller.role, method)) return;
      throw new PermissionDeniedError(
        `the ${caller.role} role (credential ${JSON.stringify(caller.name)}) may not call ${method}: it is for ${allowedCallers(method)}`,
      );
    case "anonymous":
      throw new UnauthenticatedError(
        `${method} needs a credential of this cluster (${allowedCallers(method)}); none was presented`,
      );
    default:
      throw new PermissionDeniedError(
        `${method} is for ${allowedCallers(method)}, not a ${caller.kind} certificate`,
      );
  }
}

/** Longest name of a scoped credential. */
export const maxAccessNameLength = 48;

/**
 * Whether `name` may name a scoped credential (its certificate's CN): 1–48
 * of `[a-z0-9._-]`, starting and ending with a letter or digit; not the
 * owner's CN, and not shaped like a node ID (`metropolis-…`).
 */
export function isAccessName(name: string): boolean {
  return (
    name.length <= maxAccessNameLength &&
    /^[a-z0-9](?:[a-z0-9._-]*[a-z0-9])?$/.test(name) &&
    name !== "owner" &&
    !name.startsWith("metropolis-")
  );
}
