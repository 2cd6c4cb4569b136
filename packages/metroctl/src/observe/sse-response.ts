/**
 * A page's server-sent event stream: the HTTP response kept open, one
 * `event:`/`data:` block per event, a comment every 15 s so that proxies
 * and the browser keep it open. A page that reads too slowly (more than
 * {@link maxBufferedBytes} waiting) is cut off rather than buffered without
 * bound; its EventSource reconnects and starts from a fresh snapshot.
 */
import type { ServerResponse } from "node:http";
import type { FeedSubscriber } from "./live-feed";

/** How much unsent output a slow page may have before it is cut off. */
export const maxBufferedBytes = 4 * 1024 * 1024;

const keepAliveMs = 15_000;

/** One page's open event stream. */
export class SseResponse implements FeedSubscriber {
  private readonly keepAlive: NodeJS.Timeout;
  private closed = false;

  constructor(private readonly res: ServerResponse) {
    res.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-store",
      connection: "keep-alive",
    });
    res.write(": observer\n\n");
    this.keepAlive = setInterval(() => this.write(": keep-alive\n\n"), keepAliveMs);
    res.on("close", () => this.close());
  }

  /** Calls `fn` once the stream is closed, by the page or by the server. */
  onClose(fn: () => void): void {
    if (this.closed) fn();
    else this.res.on("close", fn);
  }

  send(event: string, data: unknown): void {
    this.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  }

  /** Ends the stream. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.keepAlive);
    this.res.end();
  }

  private write(text: string): void {
    if (this.closed) return;
    if (this.res.writableLength > maxBufferedBytes) {
      this.res.destroy();
      this.close();
      return;
    }
    this.res.write(text);
  }
}
