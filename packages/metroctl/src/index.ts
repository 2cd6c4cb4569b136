/**
 * @metropolis/metroctl — the cluster owner's command line tool.
 *
 * It holds what makes its user the owner of a cluster — an Ed25519 owner
 * key, the owner certificate escrowed with it, the cluster CA — in a config
 * dir, and uses them to talk to the curator leader's Management API over
 * mutual TLS (and to each node's Debug service). Why a separate tool: the
 * owner's key never has to be on a node, and everything an operator does
 * to a cluster goes through the same authenticated API.
 *
 *   bootstrap-params ─▶ node bootstraps ─▶ takeownership ─▶ nodes, approve,
 *   set-role, label, delete, cluster-info, cluster members, cluster configure,
 *   register-params, wait, logs, tree, node describe, completion
 *
 * `runMetroctl(argv, io)` runs it in-process (tests do); `main.ts` is the
 * executable. See README.md for the commands and the trust model.
 */
export { runMetroctl } from "./run-metroctl";
export type { MetroctlIo, OutputStream } from "./io";
export { ConfigDir, type OwnerCredentials } from "./config-dir";
export type { NodeView, NodeDescription } from "./node-view";
export type { ClusterInfoView } from "./cluster-info";
export type { ClusterMembersView } from "./cluster-members";
export type { ConsensusMemberView, ConsensusView, FaultToleranceView } from "./consensus-fields";
export { MetroctlError } from "./errors";
