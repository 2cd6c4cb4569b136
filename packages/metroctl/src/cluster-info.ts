/**
 * `cluster-info`: what identifies and reaches the cluster — its CA (by
 * fingerprint), its storage policy, and the UP nodes with their addresses.
 */
import { common } from "@metropolis/proto";
import { parseCertificate } from "@metropolis/pki";
import { certificateFingerprint } from "./certificate-fingerprint";
import { withOwnerSession } from "./cluster-session";
import type { CommandContext } from "./command-context";
import { writeLine } from "./io";
import { renderTable, writeJson, type OutputFormat } from "./output";

/** `cluster-info` as `-o json` prints it. */
export interface ClusterInfoView {
  /** SHA-256 (hex) of the cluster CA certificate's DER. */
  caSha256: string;
  /** The cluster CA certificate, PEM. */
  caCertificate: string;
  /** INSECURE, ENCRYPTED or AUTHENTICATED_ENCRYPTED; null if the cluster has no configuration. */
  storagePolicy: string | null;
  /** The UP nodes of the cluster directory. */
  nodes: { id: string; publicKey: string; addresses: string[] }[];
}

/** `cluster-info [-o json]` */
export async function clusterInfo(
  ctx: CommandContext,
  opts: { output: OutputFormat },
): Promise<void> {
  const info = await withOwnerSession(ctx, (session) => session.getClusterInfo());
  const ca = parseCertificate(info.caCertificate);
  const policy = info.clusterConfiguration?.storagePolicy;
  const view: ClusterInfoView = {
    caSha256: certificateFingerprint(ca),
    caCertificate: ca.toPem(),
    storagePolicy: policy === undefined ? null : (common.StoragePolicy[policy] ?? String(policy)),
    nodes: (info.clusterDirectory?.nodes ?? [])
      .map((n) => ({
        id: n.id,
        publicKey: Buffer.from(n.publicKey).toString("hex"),
        addresses: n.addresses.map((a) => a.host),
      }))
      .sort((a, b) => a.id.localeCompare(b.id)),
  };
  if (opts.output === "json") {
    writeJson(ctx.io.stdout, view);
    return;
  }
  writeLine(ctx.io.stdout, `CA:              sha256:${view.caSha256}`);
  writeLine(ctx.io.stdout, `Storage policy:  ${view.storagePolicy ?? "-"}`);
  writeLine(ctx.io.stdout);
  writeLine(
    ctx.io.stdout,
    renderTable(
      [
        { heading: "NODE", cell: (n: ClusterInfoView["nodes"][number]) => n.id },
        { heading: "ADDRESSES", cell: (n) => n.addresses.join(",") || "-" },
      ],
      view.nodes,
    ),
  );
}
