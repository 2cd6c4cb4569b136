/**
 * Who may talk to the observer: only the page it served, in the browser of
 * the operator who started it. The server binds 127.0.0.1 only, and every
 * API request must
 *
 * - name the server itself in `Host` (`127.0.0.1:PORT`): a page of another
 *   site whose name was rebound to 127.0.0.1 (DNS rebinding) sends its own;
 * - come from the server's own origin when the browser says where it comes
 *   from (`Origin`, `Sec-Fetch-Site`), and always say so for a change (POST);
 * - carry the per-launch token (header, or `?token=` for EventSource, which
 *   cannot set headers), compared in constant time;
 * - for a change, have a JSON body of at most {@link maxBodyBytes}.
 */
import { timingSafeEqual } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { tokenHeader } from "./observer-protocol";

/** The largest request body the observer reads (actions are a few hundred bytes). */
export const maxBodyBytes = 16 * 1024;

/** A refused request: the HTTP status and why, for the response body. */
export class RequestRefusedError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/** What a request is checked against: the server's own origin and the launch token. */
export interface GuardOptions {
  /** `127.0.0.1:PORT`, as the server is reached. */
  host: string;
  token: string;
}

const sameToken = (given: string, token: string): boolean => {
  const a = Buffer.from(given);
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
};

/**
 * Checks that `req` names this server and comes from its own page; the
 * token is checked by {@link checkToken}, for API requests only (the page
 * itself, HTML and scripts, is no secret).
 * @throws RequestRefusedError 421 for a foreign Host, 403 for a foreign origin
 */
export function checkOrigin(req: IncomingMessage, opts: GuardOptions): void {
  if (req.headers.host !== opts.host) {
    throw new RequestRefusedError(421, `this server is ${opts.host} only`);
  }
  const origin = req.headers.origin;
  const ownOrigin = `http://${opts.host}`;
  if (origin !== undefined && origin !== ownOrigin) {
    throw new RequestRefusedError(403, "requests from other origins are refused");
  }
  const site = req.headers["sec-fetch-site"];
  if (site !== undefined && site !== "same-origin" && site !== "none") {
    throw new RequestRefusedError(403, "requests from other sites are refused");
  }
  if (req.method !== "GET" && req.method !== "HEAD" && origin !== ownOrigin) {
    throw new RequestRefusedError(403, "a change must come from the observer's own page");
  }
}

/**
 * Checks the launch token of an API request: header {@link tokenHeader}, or
 * the `token` query parameter.
 * @throws RequestRefusedError 401 when it is missing or wrong
 */
export function checkToken(req: IncomingMessage, url: URL, opts: GuardOptions): void {
  const header = req.headers[tokenHeader];
  const given = typeof header === "string" ? header : url.searchParams.get("token");
  if (given === null || !sameToken(given, opts.token)) {
    throw new RequestRefusedError(
      401,
      "missing or wrong observer token: open the URL metroctl printed",
    );
  }
}

/**
 * Reads a JSON request body of at most {@link maxBodyBytes}.
 * @throws RequestRefusedError 415 for another content type, 413 for a larger
 *   body, 400 for one that is not JSON
 */
export async function readJsonBody(req: IncomingMessage): Promise<unknown> {
  const type = req.headers["content-type"] ?? "";
  if (!/^application\/json\s*(;|$)/i.test(type)) {
    throw new RequestRefusedError(415, "the body must be application/json");
  }
  const declared = Number(req.headers["content-length"] ?? "0");
  if (declared > maxBodyBytes) {
    throw new RequestRefusedError(413, `the body is larger than ${maxBodyBytes} bytes`);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBodyBytes) {
      throw new RequestRefusedError(413, `the body is larger than ${maxBodyBytes} bytes`);
    }
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString("utf8"));
  } catch {
    throw new RequestRefusedError(400, "the body is not JSON");
  }
}
