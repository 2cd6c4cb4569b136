/**
 * `cluster configure get [FIELD]` and `cluster configure set FIELD VALUE`:
 * the owner reads and changes the cluster configuration
 * (Management.ConfigureCluster). `set` bases its change on the configuration
 * it has just read, so a change someone else made in between is refused by
 * the cluster (FAILED_PRECONDITION), never silently undone.
 *
 * Fields, by their proto names (`-` may stand for `_`):
 *
 *   storage_policy        insecure | encrypted | authenticated-encrypted;
 *                         applies to nodes that register afterwards, not to
 *                         nodes already in the cluster
 *   heartbeat_timeout_ms  milliseconds (1000 to 3600000), or `default` (0):
 *                         each curator's local default; applies at once
 */
import {
  configurableFields,
  maxHeartbeatTimeoutMs,
  minHeartbeatTimeoutMs,
  storagePolicies,
} from "@metropolis/curator";
import { common } from "@metropolis/proto";
import { withOwnerSession } from "./cluster-session";
import type { CommandContext } from "./command-context";
import { UsageError } from "./errors";
import { writeLine } from "./io";
import { configureFieldNames, type ConfigureFieldName } from "./flag-defaults";
import { writeJson, type OutputFormat } from "./output";

/** A storage policy as the operator writes it: `authenticated-encrypted`. */
export function storagePolicyName(policy: common.StoragePolicy): string {
  const name = common.StoragePolicy[policy] as string | undefined;
  return name === undefined ? String(policy) : name.toLowerCase().replace(/_/g, "-");
}

/** Parses a storage policy (case-insensitive, `-` or `_`); `what` names the flag or field. */
export function parseStoragePolicy(text: string, what: string): common.StoragePolicy {
  const found = storagePolicies.find(
    (p) => storagePolicyName(p) === text.toLowerCase().replace(/_/g, "-"),
  );
  if (found === undefined) {
    throw new UsageError(
      `${what}: ${JSON.stringify(text)} is not one of ${storagePolicies.map(storagePolicyName).join(", ")}`,
    );
  }
  return found;
}

/** Parses a heartbeat timeout in milliseconds, or `default` (0); `what` names the flag or field. */
export function parseHeartbeatTimeoutMs(text: string, what: string): number {
  if (text.toLowerCase() === "default") return 0;
  const ms = /^\d{1,10}$/.test(text) ? Number(text) : NaN;
  if (!(ms === 0 || (ms >= minHeartbeatTimeoutMs && ms <= maxHeartbeatTimeoutMs))) {
    throw new UsageError(
      `${what}: ${JSON.stringify(text)} is not a timeout in milliseconds from ${minHeartbeatTimeoutMs} to ${maxHeartbeatTimeoutMs}, or default`,
    );
  }
  return ms;
}

/** How metroctl shows and parses each configurable field (every one of `configureFieldNames`). */
const fields: Record<
  ConfigureFieldName,
  {
    show(config: common.ClusterConfiguration): string;
    parse(text: string): Partial<common.ClusterConfiguration>;
  }
> = {
  storage_policy: {
    show: (config) => storagePolicyName(config.storagePolicy),
    parse: (text) => ({ storagePolicy: parseStoragePolicy(text, "storage_policy") }),
  },
  heartbeat_timeout_ms: {
    show: (config) =>
      config.heartbeatTimeoutMs === 0 ? "default" : String(config.heartbeatTimeoutMs),
    parse: (text) => ({
      heartbeatTimeoutMs: parseHeartbeatTimeoutMs(text, "heartbeat_timeout_ms"),
    }),
  },
};

const isFieldName = (name: string): name is ConfigureFieldName =>
  configureFieldNames.some((field) => field === name);

function fieldName(text: string): ConfigureFieldName {
  const name = text.replace(/-/g, "_");
  if (!isFieldName(name)) {
    throw new UsageError(
      `${JSON.stringify(text)} is not a cluster configuration field (fields: ${configureFieldNames.join(", ")})`,
    );
  }
  return name;
}

/** `cluster configure get [FIELD] [-o json]` */
export async function configureGet(
  ctx: CommandContext,
  field: string | undefined,
  opts: { output: OutputFormat },
): Promise<void> {
  const names = field === undefined ? configureFieldNames : [fieldName(field)];
  const info = await withOwnerSession(ctx, (session) => session.getClusterInfo());
  const config = common.ClusterConfiguration.fromPartial(info.clusterConfiguration ?? {});
  const view = Object.fromEntries(names.map((name) => [name, fields[name].show(config)]));
  if (opts.output === "json") {
    writeJson(ctx.io.stdout, view);
    return;
  }
  if (field !== undefined) {
    writeLine(ctx.io.stdout, view[names[0]]);
    return;
  }
  for (const [name, value] of Object.entries(view)) writeLine(ctx.io.stdout, `${name}: ${value}`);
}

/** `cluster configure set FIELD VALUE` */
export async function configureSet(
  ctx: CommandContext,
  field: string,
  value: string,
): Promise<void> {
  const name = fieldName(field);
  const change = fields[name].parse(value);
  const { before, after } = await withOwnerSession(ctx, async (session) => {
    const info = await session.getClusterInfo();
    const base = common.ClusterConfiguration.fromPartial(info.clusterConfiguration ?? {});
    const res = await session.configureCluster({
      baseConfig: base,
      newConfig: common.ClusterConfiguration.fromPartial({ ...base, ...change }),
      updateMask: [name],
    });
    return { before: base, after: res.resultingConfig ?? base };
  });
  const from = fields[name].show(before);
  const to = fields[name].show(after);
  const effect = configurableFields[name]?.takesEffect;
  writeLine(
    ctx.io.stdout,
    from === to
      ? `${name} is already ${to}`
      : `${name}: ${from} → ${to}${effect === undefined ? "" : ` (${effect})`}`,
  );
}

/** `cluster configure get [FIELD] | set FIELD VALUE`: `args` are the action and its words. */
export async function clusterConfigure(
  ctx: CommandContext,
  args: readonly string[],
  opts: { output: OutputFormat },
): Promise<void> {
  const [action, ...rest] = args;
  if (action === "get" && rest.length <= 1) return configureGet(ctx, rest[0], opts);
  if (action === "set" && rest.length === 2) return configureSet(ctx, rest[0], rest[1]);
  throw new UsageError("usage: cluster configure get [FIELD] | cluster configure set FIELD VALUE");
}
