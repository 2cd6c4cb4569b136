/**
 * e2e observer: `metroctl observe` against a real cluster, its page in
 * Debian's Chromium. Two nodes (node1 the only consensus member, so that
 * node2 can die without costing the quorum): the page lists both HEALTHY;
 * a node's view shows its live supervision tree; node2's process is
 * SIGKILLed and its row turns HEARTBEAT_TIMEOUT; a third node registers,
 * shows up NEW, is approved through the page's confirmation step and comes
 * UP and HEALTHY. Screenshots of the cluster and a node's tree go to
 * reports/ (the metroctl README shows copies).
 */
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { runMetroctl } from "@metropolis/metroctl";
import type { ClusterNode } from "../local-cluster/src/cluster-launcher";
import { ObserverBrowser } from "@metropolis/metroctl/testing";
import { E2eCluster } from "./e2e-cluster";

jest.setTimeout(300_000);

const reportsDir = join(__dirname, "..", "reports");

let e2e: E2eCluster;
let browser: ObserverBrowser | undefined;

/** The browser's page; the browser starts in beforeAll. */
function page() {
  if (!browser) throw new Error("the browser did not start");
  return browser.page;
}
const stopObserver = new AbortController();
let observerExit: Promise<number> | undefined;
let observerStderr = "";
let url: string;

/** Starts `metroctl observe --port 0` in-process; resolves to the URL it prints. */
function startObserver(): Promise<string> {
  return new Promise((resolve, reject) => {
    let stdout = "";
    observerExit = runMetroctl(["--config", e2e.cluster.metroctlDir, "observe", "--port", "0"], {
      stdout: {
        write: (s: string) => {
          stdout += s;
          const printed = /^(http:\/\/127\.0\.0\.1:\d+\/#token=[0-9a-f]{64})$/m.exec(stdout);
          if (printed) resolve(printed[1]);
        },
      },
      stderr: { write: (s: string) => (observerStderr += s) },
      signal: stopObserver.signal,
    });
    void observerExit.then((code) =>
      reject(
        new Error(`metroctl observe exited ${code} before printing its URL: ${observerStderr}`),
      ),
    );
  });
}

beforeAll(async () => {
  e2e = await E2eCluster.create("observer", { nodes: 2, consensusOnEveryNode: false });
  await e2e.up();
  await mkdir(reportsDir, { recursive: true });
  url = await startObserver();
  browser = await ObserverBrowser.launch(1600, 900);
});

afterAll(async () => {
  await browser?.close();
  stopObserver.abort();
  const code = await observerExit;
  await e2e?.teardown();
  // Ctrl-C is how the observer ends: exit 0.
  expect(code).toBe(0);
});

const row = (node: ClusterNode) => `[data-testid=node-list] [data-node-id="${node.id}"]`;

/** Waits until the cluster view shows `node` with these attributes (state, health). */
async function shows(node: ClusterNode, attrs: Record<string, string>, timeoutMs = 60_000) {
  const selector =
    row(node) +
    Object.entries(attrs)
      .map(([k, v]) => `[data-${k}="${v}"]`)
      .join("");
  await page().locator(selector).waitFor({ timeout: timeoutMs });
}

describe("observer: the cluster live in a browser", () => {
  it("lists every node, UP and HEALTHY, with the curator leader", async () => {
    await e2e.measure("page shows both nodes HEALTHY", async () => {
      await page().goto(url);
      for (const node of [e2e.node(1), e2e.node(2)]) {
        await shows(node, { state: "UP", health: "HEALTHY" });
      }
    });
    await expect(page().locator("[data-testid=node-count]").textContent()).resolves.toBe("2");
    await expect(page().locator("[data-testid=leader]").textContent()).resolves.toBe(
      e2e.node(1).id,
    );
    // The token left the address bar: it is in this tab's sessionStorage only.
    expect(page().url()).not.toContain("token");
  });

  it("shows the consensus: node1 the only voter, running the curator that leads", async () => {
    const node1 = e2e.node(1);
    await page().locator("nav a", { hasText: "Consensus" }).click();
    const member = page().locator(
      `[data-testid=consensus-members] tr[data-status=voter]:has(a[href="#/node/${node1.id}"])`,
    );
    await e2e.measure("consensus view shows the voter", () => member.waitFor({ timeout: 30_000 }));
    await expect(page().locator("[data-testid=consensus-voters]").textContent()).resolves.toBe("1");
    await expect(page().locator("[data-testid=consensus-leader]").textContent()).resolves.toBe(
      node1.id,
    );
    // The term comes with the leader in the stream's first message: a number, not a placeholder.
    await expect(page().locator("[data-testid=consensus-term]").textContent()).resolves.toMatch(
      /^[1-9][0-9]*$/,
    );
    await page().locator("nav a", { hasText: "Cluster" }).click();
    await shows(node1, { state: "UP" });
  });

  it("shows a node's live supervision tree", async () => {
    const node1 = e2e.node(1);
    await page()
      .locator(`${row(node1)} a`)
      .click();
    await expect(page().locator("[data-testid=node-title]").textContent()).resolves.toBe(node1.id);
    await e2e.measure("node view shows the supervision tree", async () => {
      await page().locator('[data-testid=supervision-tree] tr[data-dn="root"]').waitFor();
      await page().locator('[data-testid=supervision-tree] tr[data-dn^="root."]').first().waitFor();
    });
    // The reports timeline and the logs fill from the node's own streams.
    await page().locator("[data-testid=reports] [data-kind=started]").first().waitFor();
    await page().locator("[data-testid=logs] .log").first().waitFor();
    const runnables = await page().locator("[data-testid=supervision-tree] tr[data-dn]").count();
    expect(runnables).toBeGreaterThan(5);
    await page().screenshot({ path: join(reportsDir, "observer-node.png"), fullPage: true });
    await page().locator("nav a", { hasText: "Cluster" }).click();
    await shows(node1, { state: "UP" });
  });

  it("turns a node whose process was killed HEARTBEAT_TIMEOUT", async () => {
    const node2 = e2e.node(2);
    await e2e.cluster.killNode(node2);
    await e2e.measure("page shows the killed node HEARTBEAT_TIMEOUT", () =>
      shows(node2, { health: "HEARTBEAT_TIMEOUT" }),
    );
  });

  it("approves a newly registered node through the page, and it comes UP", async () => {
    const node3 = await e2e.cluster.enrolNode();
    await shows(node3, { state: "NEW" });
    await page()
      .locator(`${row(node3)} [data-action=approve]`)
      .click();
    await expect(page().locator("[data-testid=action-dialog]").textContent()).resolves.toContain(
      `Approve node ${node3.id}?`,
    );
    await page().locator("[data-testid=confirm]").click();
    await expect(page().locator("[data-testid=action-result]").textContent()).resolves.toBe(
      `node ${node3.id} approved`,
    );
    await page().getByRole("button", { name: "Close" }).click();
    await e2e.measure("page shows the approved node UP and HEALTHY", () =>
      shows(node3, { state: "UP", health: "HEALTHY" }, 120_000),
    );
    await expect(page().locator("[data-testid=node-count]").textContent()).resolves.toBe("3");
    await page().screenshot({ path: join(reportsDir, "observer-cluster.png") });
  });
});
