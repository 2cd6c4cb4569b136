/**
 * @metropolis/curator — the cluster's control plane, run on every consensus
 * member, and the client every other part of the system reaches it with.
 *
 * All cluster state lives in etcd under `namespaced:curator/` (see keys.ts);
 * the curator is its only writer. One curator leads (etcd election, lease TTL
 * 10 s) and serves the cluster's gRPC APIs over mutual TLS; the others follow
 * and tell clients where the leader is. Every leader write is an etcd
 * transaction guarded by the leader's election key, so a deposed leader can
 * never commit.
 *
 *   roleserver ──▶ Curator (one supervised run: campaign → follower → leader)
 *                    ├─ leader:   Curator, Management, AAA, CuratorLocal
 *                    └─ follower: CuratorLocal (GetCurrentLeader)
 *   nodes, metroctl ──▶ CuratorConnection ──▶ whichever curator leads
 */
export {
  Curator,
  clusterServices,
  defaultCuratorPort,
  defaultLeaderTtlSeconds,
  type CuratorConfig,
} from "./curator";
export {
  CuratorConnection,
  CuratorConnectionClosedError,
  defaultCuratorKeepalive,
  type CuratorKeepalive,
  LeaderSearchTimeoutError,
  NoLeaderError,
  CuratorCertificateNotVerifiedError,
  unaryCall,
  UnansweredLeaderQuestionError,
  UnusableLeaderAnswerError,
  type CuratorConnectionOptions,
  type LeaderClients,
} from "./curator-client";
export {
  dialableDirectory,
  directoryCurators,
  formatCuratorAddress,
  type CuratorAddress,
} from "./curator-addresses";
export {
  curatorClientContext,
  curatorClientCredentials,
  curatorServerCredentials,
  silenceIpServerNameWarning,
  type TlsPem,
} from "./credentials";
export {
  IdentityCache,
  identifier,
  identify,
  ownerCommonName,
  requireOwner,
  type Caller,
} from "./identity";
export type { CuratorEndpoint } from "./leadership";
export { clusterCa, type LeaderContext, type RunningConsensus } from "./leader-context";
export type { ServiceEntry } from "./call-router";
export { managementServer, managementService } from "./management-service";
export {
  configurableFields,
  maxHeartbeatTimeoutMs,
  minHeartbeatTimeoutMs,
  storagePolicies,
  validateClusterConfiguration,
} from "./management-configuration";
export { aaaServer } from "./aaa-service";
export {
  accessRoles,
  accessTable,
  allowedCallers,
  isAccessName,
  isAccessRole,
  mayCall,
  maxAccessNameLength,
  methodKey,
  metricsEndpointKey,
  notPersonMethods,
  requireAccess,
  rolesFor,
  type AccessRole,
} from "./access-roles";
export {
  accessCredentialKey,
  accessCredentialsPrefix,
  accessRoleOf,
  accessRoleWire,
  accessServer,
  maxAccessTtlSeconds,
} from "./access-service";
export { curatorLocalServer, type LocalContext } from "./curator-local";
export { bootstrapCluster, type BootstrapParams, type BootstrapResult } from "./bootstrap";
export { validateLabels, checkLabelCount } from "./labels";
export {
  CandidacyLostError,
  CuratorError,
  FailedPreconditionError,
  InvalidArgumentError,
  PermissionDeniedError,
  UnauthenticatedError,
} from "./errors";
export { DefragmentGate, defragmentPauseMs } from "./defragment-gate";
export { Revocations } from "./revocations";
export { serverLimits } from "./server-limits";
export { quoted, clipped, maxQuotedLength } from "./bounded-text";
export { BoundedStreams, type StreamCall, type StreamCaps } from "./bounded-streams";
export { recoverCluster, type RecoverParams, type RecoverResult } from "./recover";
