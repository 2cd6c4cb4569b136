/**
 * The `api` namespace: metropolis.proto.api, whose services live in more
 * than one .proto file (api.proto: NodeParameters, Management, AAA, Debug;
 * node_management.proto: NodeManagement), as one namespace.
 */
export * from "./gen/metropolis/proto/api/api";
export * from "./gen/metropolis/proto/api/node_management";
// Both files define these; api.proto's are the namespace's (as before node_management.proto).
export {
  protobufFileName,
  protobufPackage,
  type DeepPartial,
  type Exact,
  type MessageFns,
} from "./gen/metropolis/proto/api/api";
