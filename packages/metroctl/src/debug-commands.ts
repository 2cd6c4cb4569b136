/**
 * `logs` and `tree`: a node's own view of itself, from the Debug service
 * every node serves (default port 7837) at the address it reported to the
 * cluster. The node is verified by its certificate from the cluster CA,
 * naming the node asked for; metroctl presents the owner certificate.
 */
import { Metadata, type ServiceError } from "@grpc/grpc-js";
import { status } from "@grpc/grpc-js";
import { curatorClientCredentials } from "@metropolis/curator";
import { api } from "@metropolis/proto";
import { withOwnerSession } from "./cluster-session";
import type { CommandContext } from "./command-context";
import { configFiles } from "./config-dir";
import type { DefineCommand } from "./define-command";
import { formatEndpoint } from "./endpoints";
import { ConfigFileError, MetroctlError } from "./errors";
import { parseCount, parseNodeId, parsePortFlag } from "./flag-values";
import { writeLine } from "./io";
import { outputFormatOption, writeJson, type OutputFormat } from "./output";
import { buildSupervisionTree, renderSupervisionTree } from "./supervision-tree";

/** Default port of a node's Debug service. */
export const defaultDebugPort = 7837;

/** A Debug client for node `id`, at the address the cluster knows for it. */
async function debugClient(
  ctx: CommandContext,
  id: string,
  port: number,
): Promise<api.DebugClient> {
  parseNodeId(id);
  const owner = await ctx.configDir.readOwnerCredentials();
  if (!owner) {
    throw new ConfigFileError(
      ctx.configDir.path(configFiles.ownerCertificate),
      "no owner certificate: run `metroctl takeownership` first",
    );
  }
  const node = await withOwnerSession(ctx, (session) => session.getNode(id));
  const host = node.status?.externalAddress;
  if (!host) throw new MetroctlError(`node ${id} has not reported an address yet`);
  return new api.DebugClient(
    formatEndpoint({ host, port }),
    curatorClientCredentials(owner.ca, owner, { nodeId: id }),
  );
}

/** One log line: `time level dn message [meta]`. */
export function formatLogEntry(entry: api.LogEntry): string {
  const time = entry.time ? entry.time.toISOString() : "-";
  const meta = entry.metaJson && entry.metaJson !== "{}" ? ` ${entry.metaJson}` : "";
  return `${time} ${entry.level} ${entry.dn} ${entry.message}${meta}`;
}

/** Flags of `logs`, as given. */
export interface LogsOptions {
  tail?: string;
  follow?: boolean;
  debugPort?: string;
}

const isCancelled = (e: unknown) => (e as ServiceError | undefined)?.code === status.CANCELLED;

/** `logs ID [DN] [--tail N] [--follow]` */
export async function nodeLogs(
  ctx: CommandContext,
  id: string,
  dn: string | undefined,
  opts: LogsOptions,
): Promise<void> {
  const tail = opts.tail === undefined ? undefined : parseCount(opts.tail, "--tail");
  const port =
    opts.debugPort === undefined ? defaultDebugPort : parsePortFlag(opts.debugPort, "--debug-port");
  const follow = opts.follow === true;
  const client = await debugClient(ctx, id, port);
  const signal = ctx.signal;
  try {
    const stream = client.getLogs(
      { dnPrefix: dn ?? "", tail, follow },
      new Metadata(),
      // A snapshot has a deadline; a followed stream runs until the operator stops it.
      follow ? {} : { deadline: Date.now() + ctx.dialTimeoutMs },
    );
    const cancel = () => stream.cancel();
    signal?.addEventListener("abort", cancel, { once: true });
    try {
      for await (const res of stream as AsyncIterable<api.GetLogsResponse>) {
        for (const entry of res.entries) writeLine(ctx.io.stdout, formatLogEntry(entry));
      }
    } catch (e) {
      // Ctrl-C is how a followed log ends: that is success, not an error.
      if (!(follow && signal?.aborted && isCancelled(e))) throw e;
    } finally {
      signal?.removeEventListener("abort", cancel);
    }
  } finally {
    client.close();
  }
}

/** `tree ID [-o json]` */
export async function nodeTree(
  ctx: CommandContext,
  id: string,
  opts: { output: OutputFormat; debugPort?: string },
): Promise<void> {
  const port =
    opts.debugPort === undefined ? defaultDebugPort : parsePortFlag(opts.debugPort, "--debug-port");
  const client = await debugClient(ctx, id, port);
  let res: api.GetSupervisionTreeResponse;
  try {
    res = await new Promise((resolve, reject) => {
      const call = client.getSupervisionTree(
        {},
        new Metadata(),
        { deadline: Date.now() + ctx.dialTimeoutMs },
        (err, r) => {
          ctx.signal?.removeEventListener("abort", cancel);
          if (err) reject(err);
          else resolve(r);
        },
      );
      const cancel = () => call.cancel();
      ctx.signal?.addEventListener("abort", cancel, { once: true });
    });
  } finally {
    client.close();
  }
  const tree = buildSupervisionTree(res.nodes);
  if (opts.output === "json") writeJson(ctx.io.stdout, tree);
  else writeLine(ctx.io.stdout, renderSupervisionTree(tree));
}

const debugPortOption = (define: ReturnType<DefineCommand>) =>
  define.option(
    "--debug-port <port>",
    `port of the node's Debug service (default ${defaultDebugPort})`,
  );

/** Adds `logs` and `tree`. */
export function registerDebugCommands(define: DefineCommand): void {
  debugPortOption(
    define<LogsOptions>("logs", (ctx, [id, dn], opts) => nodeLogs(ctx, id, dn, opts))
      .description("print a node's logs (time level dn message), of one DN and below")
      .argument("<id>", "node ID")
      .argument("[dn]", "DN prefix, e.g. root.role.curator (default: everything)")
      .option("--tail <n>", "only the last n backlogged lines")
      .option("-f, --follow", "keep printing new lines until interrupted"),
  );
  debugPortOption(
    define<{ output: OutputFormat; debugPort?: string }>("tree", (ctx, [id], opts) =>
      nodeTree(ctx, id, opts),
    )
      .description("draw a node's supervision tree with states, restarts and last errors")
      .argument("<id>", "node ID")
      .addOption(outputFormatOption()),
  );
}
