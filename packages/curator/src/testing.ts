/**
 * @metropolis/curator/testing — the curator's test kits, for its own tests
 * and those of the packages above it (roleserve, cluster, metroctl).
 *
 * `bootstrapTestCluster()` is the one bootstrapped cluster they all stand
 * on: a real etcd member, the cluster bootstrapped in it, the owner's
 * certificate, and a way to add nodes. `startLeader()` runs an in-process
 * leader on it serving the gRPC services a test chooses.
 *
 * For authorization tests (the curator's matrix, the node's Debug service):
 * `grpcMethods()` and `invoke()` call every RPC of the wire schema, and
 * authz-table.ts is the vocabulary of the matrices and their README copies.
 */
export {
  bootstrapTestCluster,
  newKeyPair,
  type ClusterNode,
  type KeyPair,
  type PutNodeOptions,
  type TestCluster,
  type TestClusterOptions,
  type Tls,
} from "./test-cluster";
export {
  startLeader,
  type ClientConstructor,
  type ClientIdentity,
  type LeaderFixture,
  type LeaderFixtureOptions,
  type ServiceEntry,
} from "./test-leader";
export {
  certified,
  everyone,
  identities,
  markdownTable,
  readmeTables,
  tableCells,
  withAccessRoles,
  type Expected,
  type Identity,
  type Row,
  type Table,
} from "./authz-table";
export {
  codeName,
  grpcMethods,
  invoke,
  type GrpcMethod,
  type InvokeOptions,
  type Outcome,
} from "./grpc-methods";
