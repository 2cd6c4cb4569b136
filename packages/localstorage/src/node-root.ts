/**
 * The layout of a node's storage, declared once. Every other part of the node
 * reaches its files through the object this returns, so this file is the one
 * place where the on-disk layout is defined and can be read.
 */
import { api, common } from "@metropolis/proto";
import { dataDir } from "./data-protection";
import { ephemeralDir } from "./ephemeral";
import { protobufCodec } from "./protobuf-codec";
import { dir, DirOptions, file, place } from "./tree";

// The two PKI directories have the same shape; a function, because a node
// can only ever sit in one place of a tree.
function pkiDir(options?: DirOptions) {
  return dir(
    {
      caCertificate: file("ca.pem"),
      certificate: file("cert.pem"),
      key: file("cert-key.pem", { secret: true }),
    },
    options,
  );
}

/**
 * Declares a fresh, unplaced node layout:
 *
 * - `esp.metropolis`: `parameters.pb`, `sealed_configuration.pb`,
 *   `cluster_directory.pb` — the boot partition, readable by anyone holding it.
 * - `data` (a data directory, mounted with the unlock keys): `etcd/peer_pki`,
 *   `etcd/peer_crl`, `etcd/data/`, `node/credentials`, `node/roles.pb`, `node/cluster_crl.der`,
 *   `workloads/`. The private keys (`cert-key.pem`) are secret files.
 * - `ephemeral` (in memory, cleared at every start; see ephemeral.ts):
 *   `consensus/`, `curator/`, `workloads/`.
 *
 * The `.pb` files hold protobuf messages of `@metropolis/proto` and are
 * read decoded (a file that does not parse is a `FileCorruptedError`),
 * except the sealed configuration, which is opaque until unsealed.
 */
export function nodeRoot() {
  return dir({
    esp: dir({
      metropolis: dir({
        parameters: file("parameters.pb", { codec: protobufCodec(api.NodeParameters) }),
        // Sealed: opaque bytes here, a SealedConfiguration once unsealed.
        sealedConfiguration: file("sealed_configuration.pb"),
        clusterDirectory: file("cluster_directory.pb", {
          codec: protobufCodec(common.ClusterDirectory),
        }),
      }),
    }),
    data: dataDir({
      etcd: dir({
        peerPKI: pkiDir({ name: "peer_pki" }),
        peerCRL: file("peer_crl"),
        data: dir({}),
      }),
      node: dir({
        credentials: pkiDir(),
        roles: file("roles.pb", { codec: protobufCodec(common.NodeRoles) }),
        // The cluster CA's revocation list (public; DER), as last heard from a curator.
        revocations: file("cluster_crl.der"),
      }),
      workloads: dir({}),
    }),
    ephemeral: ephemeralDir({
      consensus: dir({}),
      curator: dir({}),
      workloads: dir({}),
    }),
  });
}

/** A node's storage layout, as declared by {@link nodeRoot}. */
export type NodeRoot = ReturnType<typeof nodeRoot>;

/** Declares the node layout and places it at the absolute `rootPath` (e.g. `/var/lib/metropolis`). */
export function placeNodeRoot(rootPath: string): NodeRoot {
  return place(nodeRoot(), rootPath);
}
