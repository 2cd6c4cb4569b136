/**
 * `node logs`, `node reboot` and `node poweroff`: the owner's NodeManagement
 * service, which every node serves itself on its Debug port (default 7837)
 * at the address it reported to the cluster; reboot and power-off are
 * quorum-checked by the curator leader first. Dialled like the Debug
 * commands: owner certificate, the node verified by its certificate from
 * the cluster CA, naming the node asked for.
 */
import { Metadata } from "@grpc/grpc-js";
import { api } from "@metropolis/proto";
import type { CommandContext } from "./command-context";
import { defaultDebugPort, formatLogEntry, nodeClient, readStream } from "./debug-commands";
import { UsageError } from "./errors";
import type { LogLevelName } from "./flag-defaults";
import { parseCount, parseNodeId, parsePortFlag } from "./flag-values";
import { warnForced } from "./forced";
import { withOwnerSession } from "./cluster-session";
import { byId } from "./node-changes";
import { writeLine } from "./io";

/** The severities `--level` takes (`logLevelNames`), least severe first. */
export const logLevels: Readonly<Record<LogLevelName, api.LogSeverity>> = {
  debug: api.LogSeverity.DEBUG,
  info: api.LogSeverity.INFO,
  warn: api.LogSeverity.WARN,
  error: api.LogSeverity.ERROR,
};

/** Flags of `node logs`, as given. */
export interface NodeLogsOptions {
  dn?: string;
  exact?: boolean;
  level?: string;
  leveledOnly?: boolean;
  backlog?: string;
  follow?: boolean;
  concise?: boolean;
  debugPort?: string;
}

/** One log line, concise: `time level message`. */
export function formatConciseLogEntry(entry: api.LogEntry): string {
  const time = entry.time ? entry.time.toISOString() : "-";
  return `${time} ${entry.level} ${entry.message}`;
}

function debugPortOf(opts: { debugPort?: string }): number {
  return opts.debugPort === undefined
    ? defaultDebugPort
    : parsePortFlag(opts.debugPort, "--debug-port");
}

/** The LogsRequest that `node logs`' flags ask for. */
export function logsRequest(opts: NodeLogsOptions): api.LogsRequest {
  let minSeverity: api.LogSeverity = api.LogSeverity.UNSPECIFIED;
  if (opts.level !== undefined) {
    if (!Object.hasOwn(logLevels, opts.level)) {
      throw new UsageError(
        `--level: unknown level ${JSON.stringify(opts.level.slice(0, 64))}: one of ${Object.keys(logLevels).join(", ")}`,
      );
    }
    minSeverity = logLevels[opts.level as keyof typeof logLevels];
  }
  if (opts.exact && !opts.dn) throw new UsageError("--exact needs --dn");
  return {
    dn: opts.dn ?? "",
    exact: opts.exact === true,
    minSeverity,
    leveledOnly: opts.leveledOnly === true,
    backlogCount:
      opts.backlog === undefined || opts.backlog === "all"
        ? undefined
        : parseCount(opts.backlog, "--backlog"),
    streamMode: opts.follow
      ? api.LogsRequest_StreamMode.STREAM
      : api.LogsRequest_StreamMode.UNSPECIFIED,
  };
}

/** `node logs ID [--dn X] [--exact] [--level L] [--leveled-only] [--backlog N|all] [-f] [--concise]` */
export async function nodeManagementLogs(
  ctx: CommandContext,
  id: string,
  opts: NodeLogsOptions,
): Promise<void> {
  const request = logsRequest(opts);
  const follow = request.streamMode === api.LogsRequest_StreamMode.STREAM;
  const format = opts.concise ? formatConciseLogEntry : formatLogEntry;
  const client = await nodeClient(ctx, id, debugPortOf(opts), api.NodeManagementClient);
  try {
    const stream = client.logs(
      request,
      new Metadata(),
      // A backlog has a deadline; a followed stream runs until the operator stops it.
      follow ? {} : { deadline: Date.now() + ctx.dialTimeoutMs },
    );
    await readStream<api.LogsResponse>(ctx, stream, follow, (res) => {
      for (const entry of res.entries) writeLine(ctx.io.stdout, format(entry));
    });
  } finally {
    client.close();
  }
}

/** Flags of `node reboot` and `node poweroff`, as given. */
export interface NodePowerOptions {
  debugPort?: string;
  force?: boolean;
}

/**
 * `node reboot ID [--force]` / `node poweroff ID [--force]`: first asks the
 * curator leader whether the node may go away (CheckNodeMaintenance: a
 * refusal, FAILED_PRECONDITION naming why, is the command's error and the
 * node is not asked), then the node, which answers, then stops. `--force`
 * skips the check and says what it risks: the node's own NodeManagement
 * service does not know the consensus, so the check is the curator's.
 */
export async function nodePower(
  ctx: CommandContext,
  id: string,
  action: "reboot" | "poweroff",
  opts: NodePowerOptions,
): Promise<void> {
  parseNodeId(id);
  const port = debugPortOf(opts);
  if (opts.force === true) {
    warnForced(ctx, `node ${action}`, `taking node ${id} away`);
  } else {
    await withOwnerSession(ctx, (session) =>
      session.checkNodeMaintenance({
        node: byId(id),
        action: action === "reboot" ? api.NodeMaintenance.REBOOT : api.NodeMaintenance.POWER_OFF,
      }),
    );
  }
  const client = await nodeClient(ctx, id, port, api.NodeManagementClient);
  try {
    await new Promise<void>((resolve, reject) => {
      const options = { deadline: Date.now() + ctx.dialTimeoutMs };
      const done = (e: Error | null) => (e ? reject(e) : resolve());
      if (action === "reboot") client.reboot({}, new Metadata(), options, done);
      else client.powerOff({}, new Metadata(), options, done);
    });
  } finally {
    client.close();
  }
  writeLine(
    ctx.io.stdout,
    action === "reboot" ? `node ${id} is rebooting` : `node ${id} is powering off`,
  );
}
