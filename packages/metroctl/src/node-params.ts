/**
 * `bootstrap-params` and `register-params`: the NodeParameters files an
 * operator puts on a node's ESP (`parameters.pb`) to make it bootstrap a
 * new cluster, or register into an existing one.
 */
import { atomicWriteFile } from "@metropolis/localstorage";
import { parseCertificate } from "@metropolis/pki";
import { api, common } from "@metropolis/proto";
import { parseHeartbeatTimeoutMs, parseStoragePolicy } from "./cluster-configure";
import { certificateFingerprint } from "./certificate-fingerprint";
import { withOwnerSession } from "./cluster-session";
import type { CommandContext } from "./command-context";
import { describeError, MetroctlError } from "./errors";
import { parseLabels } from "./flag-values";
import { writeLine } from "./io";

/** Writes encoded parameters to `path` atomically; `mode` 0600 when they carry a secret. */
async function writeParams(path: string, params: api.NodeParameters, mode: number): Promise<void> {
  try {
    await atomicWriteFile(path, api.NodeParameters.encode(params).finish(), { mode });
  } catch (e) {
    throw new MetroctlError(`cannot write ${path}: ${describeError(e)}`, { cause: e });
  }
}

/** Flags of `bootstrap-params`, as given. */
export interface BootstrapParamsOptions {
  output: string;
  label: string[];
  storagePolicy?: string;
  heartbeatTimeoutMs?: string;
}

/** `bootstrap-params -o FILE [--label k=v]… [--storage-policy POLICY] [--heartbeat-timeout-ms MS]` */
export async function bootstrapParams(
  ctx: CommandContext,
  opts: BootstrapParamsOptions,
): Promise<void> {
  const labels = parseLabels(opts.label);
  // The initial configuration only when a flag asks for one: otherwise the cluster's defaults.
  const initialClusterConfiguration =
    opts.storagePolicy === undefined && opts.heartbeatTimeoutMs === undefined
      ? undefined
      : common.ClusterConfiguration.fromPartial({
          storagePolicy:
            opts.storagePolicy === undefined
              ? undefined
              : parseStoragePolicy(opts.storagePolicy, "--storage-policy"),
          heartbeatTimeoutMs:
            opts.heartbeatTimeoutMs === undefined
              ? undefined
              : parseHeartbeatTimeoutMs(opts.heartbeatTimeoutMs, "--heartbeat-timeout-ms"),
        });
  const { key, created } = await ctx.configDir.ensureOwnerKey();
  const keyPath = ctx.configDir.path("owner-key.pem");
  writeLine(
    ctx.io.stderr,
    created ? `created the owner key ${keyPath}` : `using the owner key ${keyPath}`,
  );
  await writeParams(
    opts.output,
    {
      cluster: {
        $case: "clusterBootstrap",
        clusterBootstrap: { ownerPublicKey: key.publicKey, labels, initialClusterConfiguration },
      },
    },
    0o644,
  );
  writeLine(ctx.io.stdout, `wrote bootstrap parameters to ${opts.output}`);
}

/** `register-params -o FILE [--label k=v]…` */
export async function registerParams(
  ctx: CommandContext,
  opts: { output: string; label: string[] },
): Promise<void> {
  const labels = parseLabels(opts.label);
  const [ticket, info] = await withOwnerSession(ctx, (session) =>
    Promise.all([session.getRegisterTicket(), session.getClusterInfo()]),
  );
  const directory = info.clusterDirectory ?? { nodes: [] };
  // A node given a directory without any address could never reach the cluster: refuse now,
  // not when the node has already formatted its storage.
  if (!directory.nodes.some((n) => n.addresses.some((a) => a.host !== ""))) {
    throw new MetroctlError(
      "the cluster lists no UP node with an address yet: a new node could not reach it",
    );
  }
  const ca = parseCertificate(info.caCertificate);
  await writeParams(
    opts.output,
    {
      cluster: {
        $case: "clusterRegister",
        clusterRegister: {
          registerTicket: ticket,
          clusterDirectory: directory,
          caCertificate: ca.der,
          labels,
        },
      },
    },
    // The ticket lets a machine ask to join the cluster: not for everyone's eyes.
    0o600,
  );
  writeLine(
    ctx.io.stdout,
    `wrote register parameters to ${opts.output} (${directory.nodes.length} node(s), CA sha256:${certificateFingerprint(ca)})`,
  );
}
