/**
 * `support -o FILE.tar.gz`: what a support engineer asks for, in one file.
 *
 *   metropolis-support-<time>/
 *     README.txt                      what this is, when and by whom it was made
 *     cluster/health.{txt,json}       the curator leader's health checks (cluster health)
 *     cluster/members.{txt,json}      the etcd members and fault tolerance (cluster members)
 *     cluster/configuration.json      the cluster configuration, the CA's fingerprint
 *     cluster/versions.json           metroctl's and every node's version
 *     cluster/nodes.json              every node (as nodes -o json, and their full records)
 *     nodes/<id>/describe.{txt,json}  node describe
 *     nodes/<id>/tree.{txt,json}      its supervision tree (Debug)
 *     nodes/<id>/reports.txt          its last 1,000 supervisor reports (Debug)
 *     nodes/<id>/logs.txt             its last 1,000 log lines (Debug)
 *     nodes/<id>/metrics-<e>.prom     its core and node exporters, and etcd on members
 *     nodes/<id>/<item>.error.txt     why an item is missing
 *     nodes/<id>/unreachable.txt      the node answered nothing directly, and why
 *
 * A part that fails is a file saying why, never the whole command: a node
 * that does not answer costs at most `--node-timeout` (its items are asked
 * at once, and a few nodes at a time). Without a curator leader there is no
 * list of nodes to ask: the bundle then holds the cluster part, saying so.
 *
 * No secret goes in: only what the owner's read calls answer (no register
 * ticket, no key), and every text is passed through {@link redactPrivateKeys}
 * before it is written, in case a log line ever carried a PEM key. The
 * archive is written atomically, mode 0600 (tar-gzip-file.ts).
 */
import { hostname, userInfo } from "node:os";
import { Metadata } from "@grpc/grpc-js";
import { curatorClientCredentials } from "@metropolis/curator";
import { parseCertificate } from "@metropolis/pki";
import { api, common } from "@metropolis/proto";
import { certificateFingerprint } from "./certificate-fingerprint";
import { renderClusterMembers } from "./cluster-members";
import { ClusterSession } from "./cluster-session";
import type { CommandContext } from "./command-context";
import { configFiles, type OwnerCredentials } from "./config-dir";
import { faultToleranceSummary } from "./consensus-fields";
import { consensusView } from "./consensus-view";
import { formatLogEntry, formatReport } from "./debug-commands";
import { formatEndpoint } from "./endpoints";
import { ConfigFileError } from "./errors";
import { describeFailure } from "./failure-message";
import { defaultDebugPort, defaultMetricsPort, defaultNodeTimeoutMs } from "./flag-defaults";
import { parsePortFlag, parseSeconds } from "./flag-values";
import { readClusterHealth, renderHealth } from "./health-view";
import { writeLine } from "./io";
import { fetchNodeMetrics } from "./metrics-command";
import { describeText } from "./node-describe";
import { nodeDescription, nodeView } from "./node-view";
import { buildSupervisionTree, renderSupervisionTree } from "./supervision-tree";
import { TarGzipFile } from "./tar-gzip-file";
import { metroctlVersion } from "./version";

/** Flags of `support`, as given. */
export interface SupportOptions {
  output: string;
  nodeTimeout?: string;
  debugPort?: string;
  metricsPort?: string;
}

/** Log lines kept per node (the last ones). */
export const maxLogLines = 1000;
/** Supervisor reports kept per node (the last ones). */
export const maxReports = 1000;
/** The longest log line kept; longer ones are cut. */
export const maxLogLineLength = 8 * 1024;
/** How many nodes are asked at once. */
const nodeConcurrency = 4;

/** What a node's items are collected with. */
interface NodeReach {
  owner: OwnerCredentials;
  debugPort: number;
  metricsPort: number;
  timeoutMs: number;
  signal: AbortSignal | undefined;
}

/** One file of the bundle, relative to its root directory. */
interface Entry {
  name: string;
  text: string;
}

const privateKeyBlock =
  /-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----[\s\S]*?-----END \1PRIVATE KEY-----/g;

/** `text` with every PEM private key block replaced by a note. */
export function redactPrivateKeys(text: string): string {
  return text.replace(privateKeyBlock, "[a private key was removed from the support bundle]");
}

/** A failure in one line, as metroctl prints errors. */
const why = (e: unknown, signal: AbortSignal | undefined): string =>
  describeFailure(e, signal)[0].replace(/\s*\n\s*/g, " ");

/** The user running metroctl, or `?` where the system has no name for it (no passwd entry). */
function userName(): string {
  try {
    return userInfo().username;
  } catch {
    return "?";
  }
}

/** JSON with a final newline. */
const json = (value: unknown): string => `${JSON.stringify(value, null, 2)}\n`;

/** A time as a file name part: 20260102T030405Z. */
const stamp = (t: Date): string =>
  t
    .toISOString()
    .replace(/[-:]/g, "")
    .replace(/\.\d+Z$/, "Z");

/** Runs a unary Debug call with a deadline, cancelled with `signal`. */
function unaryCall<Res>(
  start: (
    metadata: Metadata,
    options: { deadline: number },
    callback: (err: Error | null, res?: Res) => void,
  ) => { cancel(): void },
  timeoutMs: number,
  signal: AbortSignal | undefined,
): Promise<Res> {
  return new Promise((resolve, reject) => {
    const call = start(new Metadata(), { deadline: Date.now() + timeoutMs }, (err, res) => {
      signal?.removeEventListener("abort", cancel);
      if (err) reject(err);
      else if (res === undefined) reject(new Error("empty answer"));
      else resolve(res);
    });
    const cancel = () => call.cancel();
    signal?.addEventListener("abort", cancel, { once: true });
  });
}

/** Reads a server stream to its end, each message handed to `onMessage`; cancelled with `signal`. */
async function drain<T>(
  stream: AsyncIterable<T> & { cancel(): void },
  signal: AbortSignal | undefined,
  onMessage: (message: T) => void,
): Promise<void> {
  const cancel = () => stream.cancel();
  signal?.addEventListener("abort", cancel, { once: true });
  try {
    for await (const message of stream) onMessage(message);
  } finally {
    signal?.removeEventListener("abort", cancel);
  }
}

/** The last `max` of `lines`, each cut to {@link maxLogLineLength}. */
function lastLines(lines: readonly string[], max: number): string {
  const kept = lines
    .slice(-max)
    .map((l) => (l.length > maxLogLineLength ? `${l.slice(0, maxLogLineLength)}… (cut)` : l));
  return kept.length === 0 ? "" : `${kept.join("\n")}\n`;
}

/** A node's direct items: each a file (or files), or its `.error.txt`. */
async function nodeItems(node: api.Node, reach: NodeReach): Promise<Entry[]> {
  const host = node.status?.externalAddress;
  if (!host) {
    return [
      {
        name: "unreachable.txt",
        text: `node ${node.id} has not reported an address to the cluster: nothing could be asked of it\n`,
      },
    ];
  }
  const { owner, timeoutMs } = reach;
  // One listener on the run's signal per node asked (a few at once), not one per item.
  const asking = new AbortController();
  const stop = () => asking.abort(reach.signal?.reason);
  reach.signal?.addEventListener("abort", stop, { once: true });
  const signal = asking.signal;
  const debug = new api.DebugClient(
    formatEndpoint({ host, port: reach.debugPort }),
    curatorClientCredentials(owner.ca, owner, { nodeId: node.id }),
  );
  const member = node.roles?.consensusMember !== undefined;
  const exporters = member ? ["core", "node", "etcd"] : ["core", "node"];
  const items: { name: string; collect: () => Promise<Entry[]> }[] = [
    {
      name: "tree",
      collect: async () => {
        const res = await unaryCall<api.GetSupervisionTreeResponse>(
          (m, o, cb) => debug.getSupervisionTree({}, m, o, cb),
          timeoutMs,
          signal,
        );
        const tree = buildSupervisionTree(res.nodes);
        return [
          { name: "tree.txt", text: `${renderSupervisionTree(tree)}\n` },
          { name: "tree.json", text: json(tree) },
        ];
      },
    },
    {
      name: "reports",
      collect: async () => {
        const lines: string[] = [];
        await drain(
          debug.getSupervisorReports(
            { dnPrefix: "", backlog: maxReports, follow: false },
            new Metadata(),
            { deadline: Date.now() + timeoutMs },
          ),
          signal,
          (res: api.GetSupervisorReportsResponse) => {
            for (const r of res.reports) lines.push(formatReport(r));
          },
        );
        return [{ name: "reports.txt", text: lastLines(lines, maxReports) }];
      },
    },
    {
      name: "logs",
      collect: async () => {
        const lines: string[] = [];
        await drain(
          debug.getLogs({ dnPrefix: "", tail: maxLogLines, follow: false }, new Metadata(), {
            deadline: Date.now() + timeoutMs,
          }),
          signal,
          (res: api.GetLogsResponse) => {
            for (const entry of res.entries) lines.push(formatLogEntry(entry));
          },
        );
        return [{ name: "logs.txt", text: lastLines(lines, maxLogLines) }];
      },
    },
    ...exporters.map((exporter) => ({
      name: `metrics-${exporter}`,
      collect: async (): Promise<Entry[]> => [
        {
          name: `metrics-${exporter}.prom`,
          text: await fetchNodeMetrics({
            owner,
            host,
            port: reach.metricsPort,
            id: node.id,
            exporter,
            timeoutMs,
            signal,
          }),
        },
      ],
    })),
  ];
  try {
    const results = await Promise.allSettled(items.map((item) => item.collect()));
    const entries: Entry[] = [];
    const failures: string[] = [];
    results.forEach((r, i) => {
      const { name } = items[i];
      if (r.status === "fulfilled") {
        entries.push(...r.value);
        return;
      }
      const reason = why(r.reason, signal);
      failures.push(`${name}: ${reason}`);
      entries.push({ name: `${name}.error.txt`, text: `${reason}\n` });
    });
    if (failures.length === items.length) {
      entries.push({
        name: "unreachable.txt",
        text: `node ${node.id} at ${host} answered none of ${items.map((i) => i.name).join(", ")} within ${timeoutMs / 1000} s each:\n${failures.join("\n")}\n`,
      });
    }
    return entries;
  } finally {
    reach.signal?.removeEventListener("abort", stop);
    debug.close();
  }
}

/** Calls `fn` on every item of `items`, at most `limit` at once. */
async function eachLimited<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const item = items[next++];
      await fn(item);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

/** What the bundle says of the cluster. */
interface ClusterPart {
  entries: Entry[];
  /** The nodes to ask; empty when no curator leader listed them. */
  nodes: api.Node[];
  /** The curator leader that listed them. */
  leaderId: string | undefined;
}

/** What the bundle says of the cluster, and the nodes to ask. */
async function clusterPart(
  session: ClusterSession,
  signal: AbortSignal | undefined,
): Promise<ClusterPart> {
  const entries: Entry[] = [];
  const attempt = async (name: string, collect: () => Promise<Entry[]>) => {
    try {
      entries.push(...(await collect()));
    } catch (e) {
      if (signal?.aborted) throw e;
      entries.push({ name: `cluster/${name}.error.txt`, text: `${why(e, signal)}\n` });
    }
  };
  await attempt("health", async () => {
    // No leader is a verdict (a failing check); a refusal (a credential without the right) is an error file.
    const health = await readClusterHealth(session, signal);
    return [
      { name: "cluster/health.txt", text: `${renderHealth(health).join("\n")}\n` },
      { name: "cluster/health.json", text: json(health) },
    ];
  });
  let nodes: api.Node[] = [];
  let leaderId: string | undefined;
  await attempt("nodes", async () => {
    nodes = await session.getNodes();
    leaderId = await session.leaderId();
    return [
      {
        name: "cluster/nodes.json",
        text: json({
          nodes: nodes.map(nodeView),
          records: nodes.map((n) => api.Node.toJSON(n)),
        }),
      },
      {
        name: "cluster/versions.json",
        text: json({
          metroctl: await metroctlVersion(),
          nodes: Object.fromEntries(nodes.map((n) => [n.id, n.status?.version || null])),
        }),
      },
    ];
  });
  await attempt("members", async () => {
    const view = consensusView(await session.getClusterConsensus());
    const summary = view.faultTolerance && faultToleranceSummary(view.faultTolerance);
    return [
      {
        name: "cluster/members.txt",
        text: `${renderClusterMembers({ ...view, summary }).join("\n")}\n`,
      },
      { name: "cluster/members.json", text: json({ ...view, summary }) },
    ];
  });
  await attempt("configuration", async () => {
    const info = await session.getClusterInfo();
    return [
      {
        name: "cluster/configuration.json",
        text: json({
          caSha256: certificateFingerprint(parseCertificate(info.caCertificate)),
          configuration: info.clusterConfiguration
            ? common.ClusterConfiguration.toJSON(info.clusterConfiguration)
            : null,
          upNodes: (info.clusterDirectory?.nodes ?? []).map((n) => ({
            id: n.id,
            addresses: n.addresses.map((a) => a.host),
            consensusMember: n.consensusMember,
          })),
        }),
      },
    ];
  });
  return { entries, nodes, leaderId };
}

/** `support -o FILE [--node-timeout S] [--debug-port P] [--metrics-port P]` */
export async function supportBundle(ctx: CommandContext, opts: SupportOptions): Promise<void> {
  const timeoutMs =
    opts.nodeTimeout === undefined
      ? defaultNodeTimeoutMs
      : parseSeconds(opts.nodeTimeout, "--node-timeout");
  const debugPort =
    opts.debugPort === undefined ? defaultDebugPort : parsePortFlag(opts.debugPort, "--debug-port");
  const metricsPort =
    opts.metricsPort === undefined
      ? defaultMetricsPort
      : parsePortFlag(opts.metricsPort, "--metrics-port");
  const owner = await ctx.configDir.readOwnerCredentials();
  if (!owner) {
    throw new ConfigFileError(
      ctx.configDir.path(configFiles.ownerCertificate),
      "no owner certificate: run `metroctl takeownership` first",
    );
  }
  const signal = ctx.signal;
  const made = new Date();
  const root = `metropolis-support-${stamp(made)}`;
  const archive = await TarGzipFile.create(opts.output, made);
  let files = 0;
  const add = async (name: string, text: string) => {
    files++;
    await archive.add(`${root}/${name}`, redactPrivateKeys(text));
  };
  try {
    const session = await ClusterSession.asOwner(ctx);
    let cluster: ClusterPart;
    try {
      cluster = await clusterPart(session, signal);
    } finally {
      session.close();
    }
    const { leaderId } = cluster;
    await add(
      "README.txt",
      [
        "Metropolis support bundle",
        "",
        `made:     ${made.toISOString()}`,
        `by:       metroctl ${await metroctlVersion()} on ${hostname()} (${userName()})`,
        `nodes:    ${cluster.nodes.length}${leaderId ? `; curator leader ${leaderId}` : ""}`,
        `limits:   the last ${maxLogLines} log lines and ${maxReports} supervisor reports of each node; ${timeoutMs / 1000} s per item`,
        "",
        "cluster/ holds the cluster's health, members, configuration, versions and nodes;",
        "nodes/<id>/ each node's description, supervision tree, reports, logs and metrics.",
        "A file NAME.error.txt says why NAME is missing; unreachable.txt, that the node answered nothing.",
        "No key, certificate private part or register ticket is in it.",
        "",
      ].join("\n"),
    );
    for (const e of cluster.entries) await add(e.name, e.text);
    const reach: NodeReach = { owner, debugPort, metricsPort, timeoutMs, signal };
    const unreachable: string[] = [];
    await eachLimited(cluster.nodes, nodeConcurrency, async (node) => {
      const description = nodeDescription(node, leaderId);
      const entries: Entry[] = [
        { name: "describe.txt", text: `${describeText(description)}\n` },
        { name: "describe.json", text: json(description) },
        ...(await nodeItems(node, reach)),
      ];
      if (signal?.aborted) throw signal.reason;
      if (entries.some((e) => e.name === "unreachable.txt")) unreachable.push(node.id);
      for (const e of entries) await add(`nodes/${node.id}/${e.name}`, e.text);
    });
    await archive.finish();
    writeLine(
      ctx.io.stdout,
      `wrote ${opts.output}: ${cluster.nodes.length} nodes${unreachable.length > 0 ? ` (not answering: ${unreachable.sort().join(", ")})` : ""}, ${files} files`,
    );
  } catch (e) {
    await archive.abort();
    throw e;
  }
}
