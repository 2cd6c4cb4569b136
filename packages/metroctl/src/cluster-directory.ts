/**
 * `metroctl cluster directory -o FILE`: writes the cluster directory as the
 * nodes keep it on their ESP (`<root>/esp/metropolis/cluster_directory.pb`, an
 * encoded `common.ClusterDirectory`): every UP node with its ID, public key,
 * address and whether it is a consensus member, sorted by ID, the bytes
 * roleserve's directory worker writes for the same cluster. Nodes find their
 * cluster's curators only through that file, dialling the consensus members
 * it names and accepting only those nodes' certificates; after a restore from
 * a backup (`metropolis-node --recover-from`) the restored node is a new node,
 * which the former nodes' directories do not name. Copied onto a former
 * node's ESP before it starts, this file makes it find the restored cluster.
 *
 * The directory comes from the curator leader (Management.GetClusterInfo,
 * the directory it also hands to registering nodes), through the owner's
 * authenticated session. Before anything is written it is checked: each
 * node's ID is its public key's, and at least one consensus member has an
 * address (a directory without a curator would strand the node:
 * {@link DirectoryWithoutCuratorError}). It holds nothing secret (IDs, public
 * keys, addresses), so the file is written with mode 0644, atomically
 * (temporary file, synced, renamed): FILE is the whole directory or untouched.
 */
import { resolve } from "node:path";
import { dialableDirectory } from "@metropolis/curator";
import { atomicWriteFile } from "@metropolis/localstorage";
import { nodeIdFromPublicKey } from "@metropolis/pki";
import { common } from "@metropolis/proto";
import { withOwnerSession } from "./cluster-session";
import type { CommandContext } from "./command-context";
import { DirectoryWithoutCuratorError, TrustError } from "./errors";
import { writeLine } from "./io";
import { writeJson, type OutputFormat } from "./output";

const ed25519PublicKeyBytes = 32;

/** Where a node keeps its cluster directory, below its root. */
export const nodeDirectoryPath = "esp/metropolis/cluster_directory.pb";

/** What `cluster directory --format json` prints. */
export interface DirectoryView {
  /** The file written. */
  file: string;
  /** Every node in it, as in the file (sorted by ID). */
  nodes: { id: string; publicKey: string; addresses: string[]; consensusMember: boolean }[];
  /** The consensus members among them: the curators a node given the file asks for the leader. */
  curators: string[];
}

/** Flags of `cluster directory`, as given. */
export interface DirectoryOptions {
  output: string;
  format: OutputFormat;
}

/**
 * The leader's directory as nodes keep it, checked: every ID is its key's,
 * and a consensus member has an address.
 */
export function checkedDirectory(
  fromLeader: common.ClusterDirectory | undefined,
): common.ClusterDirectory {
  const all = fromLeader?.nodes ?? [];
  for (const node of all) {
    if (node.publicKey.length !== ed25519PublicKeyBytes) {
      throw new TrustError(
        `the cluster's directory lists node ${node.id} with a ${node.publicKey.length}-byte public key, not ${ed25519PublicKeyBytes}`,
      );
    }
    const derived = nodeIdFromPublicKey(node.publicKey);
    if (derived !== node.id) {
      throw new TrustError(
        `the cluster's directory lists node ${node.id} with the public key of ${derived}`,
      );
    }
  }
  const directory = dialableDirectory({ nodes: all });
  if (!directory.nodes.some((n) => n.consensusMember)) {
    const members = all.filter((n) => n.consensusMember).map((n) => n.id);
    throw new DirectoryWithoutCuratorError(
      members.length === 0
        ? `the cluster's directory names no consensus member (${all.length} UP nodes): a node given it would find no curator; nothing written`
        : `no consensus member in the cluster's directory has reported its address yet (${members.join(", ")}): a node given it would find no curator; nothing written. Run it again once \`metroctl nodes\` shows their addresses`,
    );
  }
  return directory;
}

/** `cluster directory -o FILE [--format json]` */
export async function clusterDirectory(ctx: CommandContext, opts: DirectoryOptions): Promise<void> {
  const target = resolve(opts.output);
  const info = await withOwnerSession(ctx, (session) => session.getClusterInfo());
  const directory = checkedDirectory(info.clusterDirectory);
  await atomicWriteFile(target, common.ClusterDirectory.encode(directory).finish(), {
    mode: 0o644,
  });
  const view: DirectoryView = {
    file: target,
    nodes: directory.nodes.map((n) => ({
      id: n.id,
      publicKey: Buffer.from(n.publicKey).toString("hex"),
      addresses: n.addresses.map((a) => a.host),
      consensusMember: n.consensusMember,
    })),
    curators: directory.nodes.filter((n) => n.consensusMember).map((n) => n.id),
  };
  if (opts.format === "json") {
    writeJson(ctx.io.stdout, view);
    return;
  }
  const curators = view.nodes
    .filter((n) => n.consensusMember)
    .map((n) => `${n.id}@${n.addresses.join(",")}`);
  writeLine(
    ctx.io.stdout,
    `cluster directory written to ${view.file}: ${view.nodes.length} nodes, curators ${curators.join(", ")}; ` +
      `copy it to <root>/${nodeDirectoryPath} of a node's machine before its node starts`,
  );
}
