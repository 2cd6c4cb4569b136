/**
 * The roles a cluster's first node keeps on disk (`node/roles.pb`) the
 * moment it creates the cluster, whether by bootstrapping it or by
 * restoring it from a backup: a consensus member with no peers yet (its
 * peer material comes with its first role fetch) and a Kubernetes
 * controller. Kept as rolefetch keeps the roles a curator assigns, so that
 * a restart finds its control plane role before any curator runs — the
 * node's own curator is the only one there is.
 */
import type { NodeRoot } from "@metropolis/localstorage";
import { common } from "@metropolis/proto";

/** Writes the first node's roles (see the module comment) to `storage`. */
export async function keepFirstNodeRoles(storage: NodeRoot): Promise<void> {
  await storage.data.node.roles.write(
    common.NodeRoles.fromPartial({
      consensusMember: {
        peers: [],
        caCertificate: Buffer.alloc(0),
        peerCertificate: Buffer.alloc(0),
        peerCrl: Buffer.alloc(0),
      },
      kubernetesController: {},
    }),
  );
}
