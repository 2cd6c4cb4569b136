/**
 * Management.ConfigureCluster: the owner changes the cluster configuration
 * (common.ClusterConfiguration, at `/cluster/configuration`) field by field.
 *
 * The request names the fields to change (`update_mask`, proto field names),
 * their new values (`new_config`) and the values the caller believes are
 * current (`base_config`). The change is made only if the base matches the
 * stored configuration in every masked field (optimistic concurrency: two
 * owners editing at once cannot silently undo each other), in one
 * transaction guarded by leadership and by the key's mod revision; a write
 * that raced it is re-read and the base checked again.
 *
 * Only fields the cluster honours are configurable ({@link configurableFields});
 * each says when it takes effect.
 */
import { status } from "@grpc/grpc-js";
import { api, common } from "@metropolis/proto";
import { quoted } from "./bounded-text";
import { CuratorError, FailedPreconditionError, InvalidArgumentError } from "./errors";
import { clusterConfigurationKey } from "./keys";
import type { LeaderContext } from "./leader-context";

/** The configuration of a cluster whose record does not exist (never after bootstrap). */
const emptyConfiguration = (): common.ClusterConfiguration => common.ClusterConfiguration.create();

/** Storage policies a cluster can ask its nodes for (UNSPECIFIED is not one). */
export const storagePolicies: readonly common.StoragePolicy[] = [
  common.StoragePolicy.INSECURE,
  common.StoragePolicy.ENCRYPTED,
  common.StoragePolicy.AUTHENTICATED_ENCRYPTED,
];

/** A configurable field: how to compare, validate and copy it. */
interface ConfigurableField {
  /** When a change takes effect, for errors and documentation. */
  readonly takesEffect: string;
  /** Throws InvalidArgumentError (naming the field, as `<where>.<field>`) if its value in `config` may not be set. */
  validate(config: common.ClusterConfiguration, where: string): void;
  equal(a: common.ClusterConfiguration, b: common.ClusterConfiguration): boolean;
  copy(from: common.ClusterConfiguration, to: common.ClusterConfiguration): void;
  show(config: common.ClusterConfiguration): string;
}

/** The fields ConfigureCluster changes, by mask path. */
export const configurableFields: Readonly<Record<string, ConfigurableField>> = {
  storage_policy: {
    takesEffect:
      "applies to nodes that register afterwards; nodes already in the cluster keep theirs",
    validate(config, where) {
      if (!storagePolicies.includes(config.storagePolicy)) {
        throw new InvalidArgumentError(
          `${where}.storage_policy: ${showPolicy(config.storagePolicy)} is not a storage policy (one of ${storagePolicies.map(showPolicy).join(", ")})`,
        );
      }
    },
    equal: (a, b) => a.storagePolicy === b.storagePolicy,
    copy(from, to) {
      to.storagePolicy = from.storagePolicy;
    },
    show: (config) => showPolicy(config.storagePolicy),
  },
  heartbeat_timeout_ms: {
    takesEffect: "applies at once to the leader's health answers, and to every later leader",
    validate(config, where) {
      const ms = config.heartbeatTimeoutMs;
      if (ms !== 0 && (ms < minHeartbeatTimeoutMs || ms > maxHeartbeatTimeoutMs)) {
        throw new InvalidArgumentError(
          `${where}.heartbeat_timeout_ms: ${ms} is out of range (0 for the curators' default, or ${minHeartbeatTimeoutMs} to ${maxHeartbeatTimeoutMs})`,
        );
      }
    },
    equal: (a, b) => a.heartbeatTimeoutMs === b.heartbeatTimeoutMs,
    copy(from, to) {
      to.heartbeatTimeoutMs = from.heartbeatTimeoutMs;
    },
    show: (config) =>
      config.heartbeatTimeoutMs === 0 ? "0 (default)" : String(config.heartbeatTimeoutMs),
  },
};

/** Bounds of a configured heartbeat timeout (0, the default, aside). */
export const minHeartbeatTimeoutMs = 1_000;
export const maxHeartbeatTimeoutMs = 3_600_000;

/** Throws InvalidArgumentError, naming the field, unless every configurable field of `config` may be set. */
export function validateClusterConfiguration(
  config: common.ClusterConfiguration,
  where: string,
): void {
  for (const field of Object.values(configurableFields)) field.validate(config, where);
}

/** Mask paths a request may carry at most (there are few fields; repeats are allowed). */
export const maxMaskPaths = 16;

function showPolicy(policy: common.StoragePolicy): string {
  const name = common.StoragePolicy[policy] as string | undefined;
  return name === undefined || policy === common.StoragePolicy.UNRECOGNIZED ? String(policy) : name;
}

/** The stored configuration and its key's mod revision ("0" when there is none). */
export async function readConfiguration(
  ctx: LeaderContext,
): Promise<{ config: common.ClusterConfiguration; modRevision: string }> {
  const res = await ctx.kv.get(clusterConfigurationKey).exec();
  const entry = res.kvs[0];
  if (entry === undefined) return { config: emptyConfiguration(), modRevision: "0" };
  return {
    config: common.ClusterConfiguration.decode(entry.value),
    modRevision: entry.mod_revision,
  };
}

/** Writes that raced this one before it gives up (each re-reads and re-checks the base). */
const maxConflictRetries = 5;

export async function configureCluster(
  ctx: LeaderContext,
  req: api.ConfigureClusterRequest,
): Promise<api.ConfigureClusterResponse> {
  const mask = req.updateMask ?? [];
  // Sizes before content.
  if (mask.length > maxMaskPaths) {
    throw new InvalidArgumentError(
      `update_mask has ${mask.length} paths, more than the ${maxMaskPaths} allowed`,
    );
  }
  const known = Object.keys(configurableFields);
  const fields: ConfigurableField[] = [];
  for (const path of new Set(mask)) {
    const field = Object.hasOwn(configurableFields, path) ? configurableFields[path] : undefined;
    if (field === undefined) {
      throw new InvalidArgumentError(
        `update_mask: ${quoted(path)} is not a configurable field (configurable: ${known.join(", ")})`,
      );
    }
    fields.push(field);
  }
  if (fields.length === 0) return { resultingConfig: (await readConfiguration(ctx)).config };
  const base = req.baseConfig;
  const wanted = req.newConfig;
  if (base === undefined) {
    throw new InvalidArgumentError(
      "base_config is required with a non-empty update_mask: the configuration the change is based on",
    );
  }
  if (wanted === undefined) {
    throw new InvalidArgumentError("new_config is required with a non-empty update_mask");
  }
  for (const field of fields) field.validate(wanted, "new_config");

  for (let attempt = 0; attempt < maxConflictRetries; attempt++) {
    const { config: current, modRevision } = await readConfiguration(ctx);
    for (const path of new Set(mask)) {
      const field = configurableFields[path];
      if (!field.equal(base, current)) {
        throw new FailedPreconditionError(
          `base_config.${path} is ${field.show(base)} but the cluster's is ${field.show(current)}: it changed since you read it; read the configuration again and retry`,
        );
      }
    }
    const next = common.ClusterConfiguration.fromPartial(current);
    for (const field of fields) field.copy(wanted, next);
    if (fields.every((field) => field.equal(next, current))) return { resultingConfig: current };
    const txn = ctx.leadership
      .txn()
      .and(clusterConfigurationKey, "Mod", "==", modRevision)
      .then(
        ctx.kv
          .put(clusterConfigurationKey)
          .value(Buffer.from(common.ClusterConfiguration.encode(next).finish())),
      );
    if (await ctx.leadership.commit(txn)) {
      ctx.heartbeats.configure(next);
      ctx.logger.info(
        `cluster configuration changed: ${[...new Set(mask)]
          .map(
            (path) =>
              `${path} ${configurableFields[path].show(current)} → ${configurableFields[path].show(next)}`,
          )
          .join(", ")}`,
      );
      return { resultingConfig: next };
    }
    ctx.logger.debug("the cluster configuration changed concurrently; retrying");
  }
  throw new CuratorError(
    status.ABORTED,
    "the cluster configuration kept changing concurrently; retry",
  );
}
