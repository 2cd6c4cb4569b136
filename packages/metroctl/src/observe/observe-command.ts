/**
 * `metroctl observe [--port 7840]`: starts the observer (a live view of the
 * cluster in the browser) on 127.0.0.1 and prints its URL, which carries
 * the launch token, until interrupted (Ctrl-C ends it normally). It does not
 * open a browser itself: a browser started with the URL would show the
 * token to every local user in its command line (`ps`).
 */
import type { CommandContext } from "../command-context";
import { MetroctlError } from "../errors";
import { defaultDebugPort, defaultObserverPort } from "../flag-defaults";
import { parseCount, parsePortFlag } from "../flag-values";
import { writeLine } from "../io";
import { ClusterBackend } from "./cluster-backend";
import { ObserverServer } from "./observer-server";
import { defaultUiDir } from "./static-files";

/** Flags of `observe`, as given. */
export interface ObserveOptions {
  port?: string;
  debugPort?: string;
}

/** The observer's port is taken, or cannot be listened on. */
export class ObserverListenError extends MetroctlError {}

/** Listens on `port`, turning a taken port into a message that says what to do. */
async function startServer(
  backend: ClusterBackend,
  port: number,
  uiDir: string,
): Promise<ObserverServer> {
  try {
    return await ObserverServer.start({ backend, port, uiDir });
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "EADDRINUSE") {
      throw new ObserverListenError(`127.0.0.1:${port} is in use: pick another with --port`);
    }
    throw e;
  }
}

/** `observe [--port P] [--debug-port P]`: runs until the operator interrupts. */
export async function observe(ctx: CommandContext, opts: ObserveOptions): Promise<void> {
  const port =
    opts.port === undefined ? defaultObserverPort : parseCount(opts.port, "--port", 65535);
  const debugPort =
    opts.debugPort === undefined ? defaultDebugPort : parsePortFlag(opts.debugPort, "--debug-port");
  const backend = await ClusterBackend.open(ctx, debugPort);
  let server: ObserverServer;
  try {
    server = await startServer(backend, port, defaultUiDir);
  } catch (e) {
    backend.close();
    throw e;
  }
  writeLine(
    ctx.io.stderr,
    "observer: open this URL (it holds the owner's access: keep it to yourself):",
  );
  writeLine(ctx.io.stdout, server.url);
  try {
    await new Promise<void>((resolve) => {
      const signal = ctx.signal;
      if (!signal || signal.aborted) return resolve();
      signal.addEventListener("abort", () => resolve(), { once: true });
    });
  } finally {
    await server.close();
  }
}
