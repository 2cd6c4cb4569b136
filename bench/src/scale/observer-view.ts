/**
 * The observer's cluster view with the simulated cluster attached: what an
 * operator sees when `metroctl observe` runs against thousands of nodes that
 * all heartbeat. It starts `metroctl observe` as its own process (the CLI an
 * operator runs, given a config dir holding the owner's credentials and the
 * curators), opens its page in Debian's Chromium and measures:
 *
 * - first render: from opening the page to every node listed;
 * - filter: from typing a node's ID into the filter to the list showing that
 *   one row (what the operator's keystrokes cost while the cluster streams);
 * - change: from the owner's label change (Management.UpdateNodeLabels) to
 *   the label shown in the node's row (the server coalesces changes to one
 *   batch per 250 ms, so that is the floor);
 * - main-thread load: the page's long tasks (> 50 ms, the browser's own
 *   measure of an unresponsive page) over a window of the live stream, as
 *   milliseconds per second and the longest one.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { performance } from "node:perf_hooks";
import type { CuratorAddress, CuratorConnection, TlsPem } from "@metropolis/curator";
import { ConfigDir } from "@metropolis/metroctl";
import { ObserverBrowser } from "@metropolis/metroctl/testing";
import { privateKeyFromPkcs8 } from "@metropolis/pki";
import { percentile } from "../report";
import { setNodeLabel } from "./owner-view";

/** The figures of {@link measureObserver}, in milliseconds. */
export interface ObserverFigures {
  firstRenderMs: number;
  filterP50Ms: number;
  filterMaxMs: number;
  changeP50Ms: number;
  changeP99Ms: number;
  /** Long-task time per second of the live stream (ms/s; 1000 would be a page that never answers). */
  longTaskMsPerSecond: number;
  longestTaskMs: number;
}

/** Where and how {@link measureObserver} finds the cluster. */
export interface ObserverTarget {
  caPem: string;
  owner: TlsPem;
  /** The owner's connection, for the label changes. */
  ownerConnection: CuratorConnection;
  curators: readonly CuratorAddress[];
  /** Nodes of the cluster the page must list (it lists them all; these are awaited). */
  nodeIds: readonly string[];
  progress: (line: string) => void;
}

const LABEL = "bench.scale/observer";
const samples = 10;
const longTaskWindowMs = 10_000;

/** metroctl's command-line entry (bin/metroctl.js), found from its package's main module. */
function metroctlBin(): string {
  return join(dirname(require.resolve("@metropolis/metroctl")), "..", "bin", "metroctl.js");
}

/** A metroctl config dir that makes its user the cluster's owner, dialling `curators`. */
async function ownerConfigDir(target: ObserverTarget): Promise<string> {
  const path = await mkdtemp(join(tmpdir(), "bench-scale-metroctl-"));
  const dir = new ConfigDir(path);
  await dir.writeOwnerKey(privateKeyFromPkcs8(target.owner.key));
  await dir.writeOwnerCertificate(Buffer.from(target.owner.cert), Buffer.from(target.caPem));
  await dir.writeEndpoints(target.curators.map(({ host, port }) => ({ host, port })));
  return path;
}

/** Starts `metroctl observe --port 0` with `configDir`; resolves with its process and the URL it prints. */
function startObserver(configDir: string): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(
    process.execPath,
    [metroctlBin(), "--config", configDir, "observe", "--port", "0"],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  return new Promise((resolve, reject) => {
    let stdout = "";
    let stderr = "";
    child.stdout?.on("data", (d: Buffer) => {
      stdout += d.toString();
      const printed = /^(http:\/\/127\.0\.0\.1:\d+\/#token=[0-9a-f]{64})$/m.exec(stdout);
      if (printed) resolve({ child, url: printed[1] });
    });
    child.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
    child.once("exit", (code) =>
      reject(new Error(`metroctl observe exited ${code} before printing its URL: ${stderr}`)),
    );
  });
}

/** Ends the observer as an operator does (Ctrl-C), then by SIGKILL if it lingers. */
async function stopObserver(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.pid === undefined) return;
  const exited = new Promise((r) => child.once("exit", r));
  child.kill("SIGINT");
  const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
  await exited;
  clearTimeout(timer);
}

/** Runs `action`, then waits for `predicate` in the page; the milliseconds from before `action`. */
async function timed(
  browser: ObserverBrowser,
  action: () => Promise<unknown>,
  predicate: string,
  arg: unknown,
  timeoutMs = 30_000,
): Promise<number> {
  const started = performance.now();
  await action();
  await browser.page.waitForFunction(predicate, arg, { polling: "raf", timeout: timeoutMs });
  return performance.now() - started;
}

/** The filter box shows `id` and the list exactly its row. */
const onlyRow = `(id) => {
  const rows = document.querySelectorAll("[data-testid=node-list] [data-node-id]");
  return rows.length === 1 && rows[0].getAttribute("data-node-id") === id;
}`;

/** The row of node `id` shows `label`. */
const rowShows = `([id, label]) => {
  const row = document.querySelector(\`[data-testid=node-list] [data-node-id="\${id}"] .c-labels\`);
  return row !== null && row.textContent.includes(label);
}`;

/** Measures the observer's cluster view against the cluster of `target` (see the module comment). */
export async function measureObserver(target: ObserverTarget): Promise<ObserverFigures> {
  const configDir = await ownerConfigDir(target);
  let observer: ChildProcess | undefined;
  let browser: ObserverBrowser | undefined;
  try {
    const started = await startObserver(configDir);
    observer = started.child;
    browser = await ObserverBrowser.launch(1600, 900);
    const page = browser.page;
    const wanted = target.nodeIds;

    // First render: every node listed (the count, and the windowed list drawn).
    const firstRenderMs = await timed(
      browser,
      () => page.goto(started.url),
      `(n) => Number(document.querySelector("[data-testid=node-count]")?.textContent) >= n &&
        document.querySelector("[data-testid=node-list] [data-node-id]") !== null`,
      wanted.length,
      120_000,
    );
    target.progress(
      `    observer: ${wanted.length} nodes listed ${firstRenderMs.toFixed(0)} ms after opening the page`,
    );

    // Long tasks while the stream runs (heartbeats of every node, the 1 s tick of their ages).
    await page.evaluate(`window.__longTasks = [];
      new PerformanceObserver((list) => {
        for (const e of list.getEntries()) window.__longTasks.push(e.duration);
      }).observe({ type: "longtask" });`);
    await page.waitForTimeout(longTaskWindowMs);
    const longTasks = await page.evaluate<number[]>("window.__longTasks");

    // Filter and change, on nodes spread over the list.
    const filter: number[] = [];
    const change: number[] = [];
    for (let i = 0; i < samples; i++) {
      const id = wanted[Math.floor((i * wanted.length) / samples)];
      filter.push(await timed(browser, () => page.fill("input.filter", id), onlyRow, id));
      const value = `v${i}`;
      change.push(
        await timed(
          browser,
          () => setNodeLabel(target.ownerConnection, id, LABEL, value),
          rowShows,
          [id, `${LABEL}=${value}`],
        ),
      );
    }
    return {
      firstRenderMs,
      filterP50Ms: percentile(filter, 50),
      filterMaxMs: Math.max(...filter),
      changeP50Ms: percentile(change, 50),
      changeP99Ms: percentile(change, 99),
      longTaskMsPerSecond: longTasks.reduce((a, b) => a + b, 0) / (longTaskWindowMs / 1000),
      longestTaskMs: Math.max(0, ...longTasks),
    };
  } finally {
    await browser?.close();
    if (observer) await stopObserver(observer);
    await rm(configDir, { recursive: true, force: true });
  }
}
