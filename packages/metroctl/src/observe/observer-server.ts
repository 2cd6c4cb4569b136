/**
 * The observer's HTTP server, on 127.0.0.1 only: the page (static files),
 * the live feeds as server-sent events, and the owner's actions. Every
 * request passes the checks of request-guard.ts; API requests also need the
 * per-launch token, which only the URL printed by `metroctl observe` holds.
 *
 *   GET  /api/cluster/events                   snapshot, delta, failure
 *   GET  /api/consensus/events                 consensus, failure
 *   GET  /api/nodes/ID/tree/events             tree, failure
 *   GET  /api/nodes/ID/reports/events          reports, failure
 *   GET  /api/nodes/ID/logs/events?dn=&level=&follow=   logs, failure
 *   POST /api/nodes/ID/approve | roles | labels           → ActionResult
 *
 * One feed runs per cluster, for the consensus, per node view and per log filter, shared by
 * every page that shows it, and stops when the last page leaves.
 */
import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { UsageError } from "../errors";
import { describeFailure } from "../failure-message";
import { isNodeId } from "@metropolis/pki";
import { ClusterFeed } from "./cluster-feed";
import type { LiveFeed, LiveFeedOptions } from "./live-feed";
import { BatchFeed, LatestFeed } from "./node-feeds";
import type { ObserverBackend } from "./observer-backend";
import {
  observedLogLevels,
  type ActionResult,
  type LabelsChange,
  type LogsQuery,
  type RolesChange,
} from "./observer-protocol";
import {
  checkOrigin,
  checkToken,
  readJsonBody,
  RequestRefusedError,
  type GuardOptions,
} from "./request-guard";
import { SseResponse } from "./sse-response";
import { loadStaticFiles, type StaticFile } from "./static-files";

export { defaultObserverPort } from "../flag-defaults";

/** How the server is started. */
export interface ObserverServerOptions {
  backend: ObserverBackend;
  /** 0 picks a free port. */
  port: number;
  /** The built page (default: metroctl's observer-ui/dist). */
  uiDir: string;
  /** The launch token; default 32 random bytes, hex. */
  token?: string;
  /** Timing of the feeds (tests make them quick). */
  feedOptions?: LiveFeedOptions;
}

/** Headers of every answer: nothing cached, nothing framed, no referrer, only our own code. */
const securityHeaders = {
  "cache-control": "no-store",
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "referrer-policy": "no-referrer",
  "content-security-policy":
    "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
};

const sendJson = (res: ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { ...securityHeaders, "content-type": "application/json; charset=utf-8" });
  res.end(JSON.stringify(body));
};

const nodeRoute =
  /^\/api\/nodes\/([^/]+)\/(tree\/events|reports\/events|logs\/events|approve|roles|labels)$/;

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** The roles change of a request body. @throws RequestRefusedError 400 */
function rolesChange(body: unknown): RolesChange {
  if (!isObject(body)) throw new RequestRefusedError(400, "the body must be an object");
  const change: RolesChange = {};
  for (const role of ["consensus", "controller", "worker"] as const) {
    const value = body[role];
    if (value === undefined) continue;
    if (typeof value !== "boolean") {
      throw new RequestRefusedError(400, `${role} must be true or false`);
    }
    change[role] = value;
  }
  return change;
}

/** The labels change of a request body. @throws RequestRefusedError 400 */
function labelsChange(body: unknown): LabelsChange {
  const changes = isObject(body) ? body.changes : undefined;
  if (!Array.isArray(changes) || !changes.every((c): c is string => typeof c === "string")) {
    throw new RequestRefusedError(400, "changes must be a list of key=value and key-");
  }
  return { changes };
}

/** The logs view's query of a URL. @throws RequestRefusedError 400 */
function logsQuery(url: URL): LogsQuery {
  const dn = url.searchParams.get("dn") ?? "";
  if (dn.length > 256 || !/^[\w.-]*$/.test(dn)) {
    throw new RequestRefusedError(400, "dn must be a DN such as root.roleserver");
  }
  const level = url.searchParams.get("level") ?? "debug";
  const known = observedLogLevels.find((l) => l === level);
  if (known === undefined) {
    throw new RequestRefusedError(400, `level must be one of ${observedLogLevels.join(", ")}`);
  }
  return { dn, level: known, follow: url.searchParams.get("follow") !== "0" };
}

/** The running observer; see the module comment. */
export class ObserverServer {
  private readonly feeds = new Map<string, LiveFeed>();
  private readonly streams = new Set<SseResponse>();
  private readonly guard: GuardOptions;

  private constructor(
    private readonly server: Server,
    private readonly opts: ObserverServerOptions,
    private readonly files: Map<string, StaticFile>,
    /** The port it listens on. */
    readonly port: number,
    token: string,
  ) {
    this.guard = { host: `127.0.0.1:${port}`, token };
  }

  /**
   * Starts the server on 127.0.0.1:`port`.
   * @throws ObserverUiMissingError when the page was not built; the listen
   *   error (EADDRINUSE) when the port is taken
   */
  static async start(opts: ObserverServerOptions): Promise<ObserverServer> {
    const files = await loadStaticFiles(opts.uiDir);
    const token = opts.token ?? randomBytes(32).toString("hex");
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(opts.port, "127.0.0.1", () => {
        server.off("error", reject);
        resolve();
      });
    });
    const { port } = server.address() as AddressInfo;
    const observer = new ObserverServer(server, opts, files, port, token);
    server.on("request", (req: IncomingMessage, res: ServerResponse) => {
      observer.handle(req, res).catch((e: unknown) => observer.refuse(res, e));
    });
    return observer;
  }

  /** The page's URL with the launch token: whoever has it can act as the cluster's owner. */
  get url(): string {
    return `http://${this.guard.host}/#token=${this.guard.token}`;
  }

  /** The origin pages are served from. */
  get origin(): string {
    return `http://${this.guard.host}`;
  }

  /** Stops every feed, closes every page's stream and the server. */
  async close(): Promise<void> {
    for (const feed of this.feeds.values()) feed.stop();
    this.feeds.clear();
    for (const stream of this.streams) stream.close();
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
    this.opts.backend.close();
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    checkOrigin(req, this.guard);
    const url = new URL(req.url ?? "/", this.origin);
    if (!url.pathname.startsWith("/api/")) return this.serveFile(req, res, url);
    checkToken(req, url, this.guard);
    if (url.pathname === "/api/cluster/events") {
      this.needMethod(req, "GET");
      return this.stream(req, res, "cluster", () => {
        return new ClusterFeed((s) => this.opts.backend.cluster(s), this.opts.feedOptions);
      });
    }
    if (url.pathname === "/api/consensus/events") {
      this.needMethod(req, "GET");
      return this.stream(req, res, "consensus", () => {
        return new LatestFeed(
          "consensus",
          (s) => this.opts.backend.consensus(s),
          this.opts.feedOptions,
        );
      });
    }
    const match = nodeRoute.exec(url.pathname);
    if (!match) throw new RequestRefusedError(404, "no such API");
    const [, id, what] = match;
    if (!isNodeId(id)) throw new RequestRefusedError(400, "not a node ID");
    const backend = this.opts.backend;
    const feedOptions = this.opts.feedOptions;
    switch (what) {
      case "tree/events":
        this.needMethod(req, "GET");
        return this.stream(req, res, `tree ${id}`, () => {
          return new LatestFeed("tree", (s) => backend.tree(id, s), feedOptions);
        });
      case "reports/events":
        this.needMethod(req, "GET");
        return this.stream(req, res, `reports ${id}`, () => {
          return new BatchFeed("reports", "reports", (s) => backend.reports(id, s), feedOptions);
        });
      case "logs/events": {
        this.needMethod(req, "GET");
        const query = logsQuery(url);
        const key = `logs ${id} ${JSON.stringify(query)}`;
        return this.stream(req, res, key, () => {
          return new BatchFeed("logs", "entries", (s) => backend.logs(id, query, s), {
            ...feedOptions,
            finite: !query.follow,
          });
        });
      }
      case "approve":
        this.needMethod(req, "POST");
        await readJsonBody(req);
        return this.act(res, () => backend.approve(id));
      case "roles": {
        this.needMethod(req, "POST");
        const change = rolesChange(await readJsonBody(req));
        return this.act(res, () => backend.setRoles(id, change));
      }
      default: {
        this.needMethod(req, "POST");
        const change = labelsChange(await readJsonBody(req));
        return this.act(res, () => backend.setLabels(id, change));
      }
    }
  }

  private needMethod(req: IncomingMessage, method: "GET" | "POST"): void {
    if (req.method !== method) throw new RequestRefusedError(405, `use ${method}`);
  }

  private serveFile(req: IncomingMessage, res: ServerResponse, url: URL): void {
    if (req.method !== "GET" && req.method !== "HEAD") {
      throw new RequestRefusedError(405, "use GET");
    }
    const file = this.files.get(url.pathname);
    if (!file) throw new RequestRefusedError(404, "not found");
    res.writeHead(200, { ...securityHeaders, "content-type": file.contentType });
    res.end(req.method === "HEAD" ? undefined : file.body);
  }

  /** Subscribes the page to feed `key` (created by `create` if nobody watches it yet). */
  private stream(
    req: IncomingMessage,
    res: ServerResponse,
    key: string,
    create: () => LiveFeed,
  ): void {
    let feed = this.feeds.get(key);
    if (!feed) {
      feed = create();
      this.feeds.set(key, feed);
    }
    const stream = new SseResponse(res);
    this.streams.add(stream);
    const unsubscribe = feed.subscribe(stream);
    const shared = feed;
    stream.onClose(() => {
      this.streams.delete(stream);
      unsubscribe();
      if (shared.subscriberCount === 0 && this.feeds.get(key) === shared) this.feeds.delete(key);
    });
    req.socket.setTimeout(0);
  }

  /** Runs an action; answers 200 with its result, or 422 with the API's refusal. */
  private async act(res: ServerResponse, action: () => Promise<string>): Promise<void> {
    let result: ActionResult;
    try {
      result = { ok: true, message: await action() };
    } catch (e) {
      const message = describeFailure(e, undefined)[0];
      return sendJson(res, e instanceof UsageError ? 400 : 422, {
        ok: false,
        error: message.slice(0, 2000),
      } satisfies ActionResult);
    }
    sendJson(res, 200, result);
  }

  private refuse(res: ServerResponse, e: unknown): void {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    const status = e instanceof RequestRefusedError ? e.status : 500;
    const message = e instanceof RequestRefusedError ? e.message : describeFailure(e, undefined)[0];
    sendJson(res, status, { ok: false, error: message } satisfies ActionResult);
  }
}
