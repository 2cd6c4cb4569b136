/**
 * The wire schema of Metropolis-TS: the TypeScript code ts-proto generates
 * from `schema/**.proto` (into `src/gen/`, committed; see README.md), one
 * namespace per .proto package:
 *
 * - `common`: metropolis.proto.common — enums and messages shared by the rest.
 * - `api`: metropolis.proto.api — NodeParameters; the Management, AAA, Debug and
 *   NodeManagement services (api.proto and node_management.proto, see api.ts).
 * - `curator`: metropolis.proto.curator — the Curator and CuratorLocal services.
 * - `access`: metropolis.proto.access — the Access service (scoped credentials).
 * - `priv`: metropolis.proto.private — records kept in etcd and sealed on disk.
 *   (`private` is a reserved word, so it could not be imported by name.)
 *
 * Each message `M` is an interface plus a value `M` with `encode`, `decode`,
 * `fromJSON`, `toJSON`, `create` and `fromPartial`; each service `S` has a
 * grpc-js service definition `SService`, a server interface `SServer` and a
 * client class `SClient`.
 *
 * Also the wire protocol version (`protocolVersion`, protocol-version.ts):
 * what nodes and curators check before they talk.
 */
export * as common from "./gen/metropolis/proto/common/common";
export * as api from "./api";
export * as curator from "./gen/metropolis/proto/curator/curator";
export * as priv from "./gen/metropolis/proto/private/private";
/** metropolis.proto.access — the Access service: scoped credentials (access.proto). */
export * as access from "./gen/metropolis/proto/access/access";
/**
 * The writer the generated `encode` functions write to: for a message put
 * together from parts encoded earlier (`writer.raw(bytes)`), as the curator's
 * node listings are.
 */
export { BinaryWriter } from "@bufbuild/protobuf/wire";
export { protocolVersion, servedProtocolVersions, spokenProtocolVersion } from "./protocol-version";
