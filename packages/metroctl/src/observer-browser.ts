/**
 * Debian's Chromium (scripts/ensure-chromium.sh installs it), driven by
 * playwright-core, for the observer's browser tests: a fresh profile (a
 * temp dir playwright creates and removes), no
 * background networking (on a closed network Chromium otherwise hangs on
 * it), and its process stopped by PID however the test ends.
 */
import { chromium, type Browser, type BrowserServer, type Page } from "playwright-core";

/** Where Debian puts Chromium; METROPOLIS_CHROMIUM overrides it. */
export const chromiumPath = process.env.METROPOLIS_CHROMIUM ?? "/usr/bin/chromium";

/** A running Chromium and its page. */
export class ObserverBrowser {
  private constructor(
    private readonly server: BrowserServer,
    private readonly browser: Browser,
    readonly page: Page,
    /** PID of the browser process. */
    readonly pid: number,
  ) {}

  /** Starts Chromium headless and opens a page of `width`×`height`. */
  static async launch(width = 1500, height = 900): Promise<ObserverBrowser> {
    const server = await chromium.launchServer({
      executablePath: chromiumPath,
      headless: true,
      args: [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
      ],
    });
    const pid = server.process().pid;
    if (pid === undefined) throw new Error("Chromium started without a PID");
    try {
      const browser = await chromium.connect(server.wsEndpoint());
      const page = await browser.newPage({ viewport: { width, height } });
      return new ObserverBrowser(server, browser, page, pid);
    } catch (e) {
      process.kill(pid, "SIGKILL");
      throw e;
    }
  }

  /** Closes the browser and kills its process if it is still there. */
  async close(): Promise<void> {
    await this.browser.close().catch(() => undefined);
    await this.server.close().catch(() => undefined);
    try {
      process.kill(this.pid, "SIGKILL");
    } catch {
      // Already gone: the normal case.
    }
  }
}
