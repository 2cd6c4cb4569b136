/**
 * The `api` namespace: metropolis.proto.api, whose services live in more
 * than one .proto file (api.proto: NodeParameters, Management, AAA, Debug;
 * node_management.proto: NodeManagement; maintenance.proto: the messages of
 * decommissioning and of etcd's member operations; health.proto: the
 * messages of GetClusterHealth), as one namespace.
 */
export * from "./gen/metropolis/proto/api/api";
export * from "./gen/metropolis/proto/api/node_management";
export * from "./gen/metropolis/proto/api/maintenance";
export * from "./gen/metropolis/proto/api/backup";
export * from "./gen/metropolis/proto/api/health";
// Both files define these; api.proto's are the namespace's (as before node_management.proto).
export {
  protobufFileName,
  protobufPackage,
  type DeepPartial,
  type Exact,
  type MessageFns,
} from "./gen/metropolis/proto/api/api";
