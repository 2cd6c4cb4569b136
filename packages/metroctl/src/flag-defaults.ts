/**
 * The defaults and fixed choices of metroctl's flags, apart from the
 * commands that use them: the command table (`command-table.ts`) names them
 * in every command's help, and must do so without loading those commands
 * (grpc-js, the protobuf code, x509, CEL), so that `--help` answers at once.
 * This module imports nothing.
 */

/** Default time to find and reach the curator leader, per call. */
export const defaultDialTimeoutMs = 30_000;

/** Default port of a node's Debug service (and its NodeManagement service). */
export const defaultDebugPort = 7837;

/** Default port of a node's mTLS metrics endpoint. */
export const defaultMetricsPort = 7838;

/** How long `support` waits for each item of a node by default. */
export const defaultNodeTimeoutMs = 10_000;

/** The exporters a node serves under /metrics/. */
export const metricsExporters = ["core", "node", "etcd"] as const;

/** Default port of `metroctl observe` on 127.0.0.1. */
export const defaultObserverPort = 7840;

/** How long `wait` waits by default. */
export const defaultWaitTimeoutMs = 300_000;

/** How long each step of `cluster rolling-reboot` may take to come back, by default. */
export const defaultRollingRebootTimeoutMs = 300_000;

/** How often `wait` polls by default. */
export const defaultPollIntervalMs = 1000;

/** The safety checks of DeleteNode that `delete --bypass` can lift. */
export const bypassChecks = ["has-roles", "node-up"] as const;

/** The severities `node logs --level` takes, least severe first. */
export const logLevelNames = ["debug", "info", "warn", "error"] as const;

/** A severity `node logs --level` takes. */
export type LogLevelName = (typeof logLevelNames)[number];

/** The cluster configuration fields `cluster configure` reads and changes, by their proto names. */
export const configureFieldNames = ["storage_policy", "heartbeat_timeout_ms"] as const;

/** A field `cluster configure` reads and changes. */
export type ConfigureFieldName = (typeof configureFieldNames)[number];
