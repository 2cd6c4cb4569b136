/**
 * `logs`, `tree` and `reports`: a node's own view of itself, from the Debug service
 * every node serves (default port 7837) at the address it reported to the
 * cluster. The node is verified by its certificate from the cluster CA,
 * naming the node asked for; metroctl presents the owner certificate.
 */
import { Metadata, type ChannelCredentials, type ServiceError } from "@grpc/grpc-js";
import { status } from "@grpc/grpc-js";
import { curatorClientCredentials } from "@metropolis/curator";
import { api } from "@metropolis/proto";
import type { CommandContext } from "./command-context";
import { formatEndpoint } from "./endpoints";
import { defaultDebugPort } from "./flag-defaults";
import { parseCount, parsePortFlag } from "./flag-values";
import { writeLine } from "./io";
import { nodeEndpoint } from "./node-endpoint";
import type { ObservedReport } from "./observe/observer-protocol";
import { writeJson, type OutputFormat } from "./output";
import { buildSupervisionTree, renderSupervisionTree } from "./supervision-tree";

export { defaultDebugPort } from "./flag-defaults";

/** A Debug client for node `id`, at the address the cluster knows for it. */
function debugClient(ctx: CommandContext, id: string, port: number): Promise<api.DebugClient> {
  return nodeClient(ctx, id, port, api.DebugClient);
}

/**
 * A client of one of the services node `id` serves itself (Debug,
 * NodeManagement), at the address the cluster knows for it, with the owner
 * certificate, verifying that the node answering is `id`.
 */
export async function nodeClient<C>(
  ctx: CommandContext,
  id: string,
  port: number,
  Client: new (address: string, credentials: ChannelCredentials) => C,
): Promise<C> {
  const { owner, host } = await nodeEndpoint(ctx, id);
  return new Client(
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

export const isCancelled = (e: unknown) =>
  (e as ServiceError | undefined)?.code === status.CANCELLED;

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

/** Flags of `tree`, as given. */
export interface TreeOptions {
  output: OutputFormat;
  watch?: boolean;
  debugPort?: string;
}

/** Clears a terminal and puts the cursor top left: the next frame replaces the last. */
const clearScreen = "\x1b[H\x1b[2J";

/**
 * Reads a server stream until it ends, or until the operator interrupts
 * (Ctrl-C cancels the stream; for a stream that only ends that way,
 * `endless`, that is success).
 */
export async function readStream<T>(
  ctx: CommandContext,
  stream: AsyncIterable<T> & { cancel(): void },
  endless: boolean,
  onMessage: (message: T) => void,
): Promise<void> {
  const signal = ctx.signal;
  const cancel = () => stream.cancel();
  signal?.addEventListener("abort", cancel, { once: true });
  if (signal?.aborted) cancel();
  try {
    for await (const message of stream) onMessage(message);
  } catch (e) {
    if (!(endless && signal?.aborted && isCancelled(e))) throw e;
  } finally {
    signal?.removeEventListener("abort", cancel);
  }
}

/**
 * `tree ID --watch`: the tree again after every change until interrupted.
 * On a terminal each frame replaces the last; otherwise frames follow each
 * other, a blank line apart (`-o json`: one JSON document per line).
 */
async function watchTree(ctx: CommandContext, client: api.DebugClient, output: OutputFormat) {
  const out = ctx.io.stdout;
  let frames = 0;
  await readStream(
    ctx,
    client.watchSupervisionTree({}, new Metadata(), {}),
    true,
    (res: api.WatchSupervisionTreeResponse) => {
      const tree = buildSupervisionTree(res.nodes);
      if (output === "json") return writeLine(out, JSON.stringify(tree));
      const frame = renderSupervisionTree(tree);
      if (out.isTTY) out.write(clearScreen + frame + "\n");
      else writeLine(out, (frames > 0 ? "\n" : "") + frame);
      frames++;
    },
  );
}

/** `tree ID [-o json] [--watch]` */
export async function nodeTree(ctx: CommandContext, id: string, opts: TreeOptions): Promise<void> {
  const port =
    opts.debugPort === undefined ? defaultDebugPort : parsePortFlag(opts.debugPort, "--debug-port");
  const client = await debugClient(ctx, id, port);
  if (opts.watch === true) {
    try {
      return await watchTree(ctx, client, opts.output);
    } finally {
      client.close();
    }
  }
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

/** Flags of `reports`, as given. */
export interface ReportsOptions {
  dn?: string;
  backlog?: string;
  follow?: boolean;
  output: OutputFormat;
  debugPort?: string;
}

/** Report kinds as `reports` prints them. */
const reportKindNames: Record<number, string> = {
  [api.SupervisorReportKind.STARTED]: "started",
  [api.SupervisorReportKind.HEALTHY]: "healthy",
  [api.SupervisorReportKind.DONE]: "done",
  [api.SupervisorReportKind.DIED]: "died",
  [api.SupervisorReportKind.RESTART_SCHEDULED]: "restart-scheduled",
  [api.SupervisorReportKind.GIVEN_UP]: "given-up",
  [api.SupervisorReportKind.ESCALATED]: "escalated",
};

/**
 * One report line: `time kind dn detail`, e.g.
 * `2024-05-01T12:00:01.000Z died root.network ProcessExitedError: exited with 1`.
 * Only the first line of an error message; no stack (`-o json` has it).
 */
export function formatReport(r: api.SupervisorReport): string {
  const time = r.time ? r.time.toISOString() : "-";
  const kind = reportKindNames[r.kind] ?? `kind-${r.kind}`;
  const error = r.error ? `${r.error.name}: ${r.error.message.split("\n")[0]}` : "";
  const parts: string[] = [];
  switch (r.kind) {
    case api.SupervisorReportKind.STARTED:
      if (r.restarts > 0) parts.push(`restart ${r.restarts}`);
      break;
    case api.SupervisorReportKind.RESTART_SCHEDULED:
      parts.push(`in ${r.delayMs} ms (attempt ${r.attempt})`);
      break;
    case api.SupervisorReportKind.GIVEN_UP:
      parts.push(`more than ${r.maxRestarts} restarts in ${r.periodMs} ms`);
      if (error) parts.push(`last error ${error}`);
      break;
    case api.SupervisorReportKind.ESCALATED:
      parts.push(`to ${r.escalatedTo || "the tree (past the root)"}`);
      if (error) parts.push(error);
      break;
    default:
      if (error) parts.push(error);
  }
  const dropped = r.dropped > 0 ? `(${r.dropped} reports dropped before this one) ` : "";
  const detail = parts.join("; ");
  return `${time} ${kind} ${r.dn}${detail ? " " + detail : ""}${dropped ? " " + dropped.trim() : ""}`;
}

/** A report as `reports -o json` prints it (one JSON object per line) and the observer sends it. */
export function reportJson(r: api.SupervisorReport): ObservedReport {
  return {
    seq: r.seq,
    time: r.time ? r.time.toISOString() : null,
    kind: reportKindNames[r.kind] ?? `kind-${r.kind}`,
    dn: r.dn,
    ...(r.kind === api.SupervisorReportKind.STARTED && { restarts: r.restarts }),
    ...(r.kind === api.SupervisorReportKind.RESTART_SCHEDULED && {
      delayMs: r.delayMs,
      attempt: r.attempt,
    }),
    ...(r.kind === api.SupervisorReportKind.GIVEN_UP && {
      maxRestarts: r.maxRestarts,
      periodMs: r.periodMs,
    }),
    ...(r.kind === api.SupervisorReportKind.ESCALATED && { escalatedTo: r.escalatedTo || null }),
    ...(r.error && { error: r.error }),
    ...(r.dropped > 0 && { dropped: r.dropped }),
  };
}

/** `reports ID [--dn PREFIX] [--backlog N] [-f] [-o json]` */
export async function nodeReports(
  ctx: CommandContext,
  id: string,
  opts: ReportsOptions,
): Promise<void> {
  const backlog = opts.backlog === undefined ? undefined : parseCount(opts.backlog, "--backlog");
  const port =
    opts.debugPort === undefined ? defaultDebugPort : parsePortFlag(opts.debugPort, "--debug-port");
  const follow = opts.follow === true;
  const client = await debugClient(ctx, id, port);
  try {
    await readStream(
      ctx,
      client.getSupervisorReports(
        { dnPrefix: opts.dn ?? "", backlog, follow },
        new Metadata(),
        // The kept reports have a deadline; a followed stream runs until the operator stops it.
        follow ? {} : { deadline: Date.now() + ctx.dialTimeoutMs },
      ),
      follow,
      (res: api.GetSupervisorReportsResponse) => {
        for (const r of res.reports) {
          writeLine(
            ctx.io.stdout,
            opts.output === "json" ? JSON.stringify(reportJson(r)) : formatReport(r),
          );
        }
      },
    );
  } finally {
    client.close();
  }
}
