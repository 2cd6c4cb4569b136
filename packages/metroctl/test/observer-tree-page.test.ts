/**
 * The observer's node page in Chromium, against its real server with a
 * backend the test feeds: its supervision tree shows what each runnable says
 * it is doing (a state machine's state) first in the detail cell, follows it
 * as it changes, and drops it when the runnable's run ended. Apart from
 * observer-page.test.ts so that each file has one concern.
 */
import { ObserverServer } from "../src/observe/observer-server";
import type { ObservedRunnable } from "../src/observe/observer-protocol";
import { defaultUiDir } from "../src/observe/static-files";
import { ObserverBrowser } from "../src/observer-browser";
import { FakeBackend, fakeNode, fakeNodeId } from "./observer-fixture";

jest.setTimeout(60_000);

let backend: FakeBackend;
let server: ObserverServer;
let browser: ObserverBrowser;

beforeAll(async () => {
  backend = new FakeBackend();
  server = await ObserverServer.start({ backend, port: 0, uiDir: defaultUiDir });
  browser = await ObserverBrowser.launch();
});

afterAll(async () => {
  await browser?.close();
  await server?.close();
});

const runnable = (dn: string, more: Partial<ObservedRunnable> = {}): ObservedRunnable => ({
  dn,
  name: dn.slice(dn.lastIndexOf(".") + 1),
  state: "HEALTHY",
  restarts: 0,
  since: null,
  lastError: null,
  nextRestartInMs: null,
  givenUp: false,
  status: null,
  children: [],
  ...more,
});

test("a node's supervision tree shows each runnable's state first, as it changes", async () => {
  const { page } = browser;
  const id = fakeNodeId(0);
  await page.goto(server.url);
  backend.clusterChannel.push({ nodes: [fakeNode(0)], leaderId: id });
  await page.locator(`[data-testid=node-list] a[href="#/node/${id}"]`).click();
  await page.locator("[data-testid=node-title]", { hasText: id }).waitFor();
  const tree = (curator: ObservedRunnable) => ({
    roots: [runnable("root", { children: [curator] })],
    receivedAt: Date.now(),
  });
  const curatorRow = '[data-testid=supervision-tree] [data-dn="root.curator"]';
  backend.trees.push(
    tree(
      runnable("root.curator", {
        status: "leading.leaseUnconfirmed",
        restarts: 1,
        lastError: "lease lost",
      }),
    ),
  );
  await page.locator(`${curatorRow} [data-testid=runnable-status]`).waitFor();
  await expect(page.locator(`${curatorRow} td.detail`).textContent()).resolves.toBe(
    "state: leading.leaseUnconfirmed lease lost",
  );
  // The root published nothing: no status in its row.
  await expect(
    page
      .locator('[data-testid=supervision-tree] [data-dn="root"] [data-testid=runnable-status]')
      .count(),
  ).resolves.toBe(0);

  backend.trees.push(tree(runnable("root.curator", { status: "leading.leaseConfirmed" })));
  await page
    .locator(`${curatorRow} [data-testid=runnable-status]`, {
      hasText: "state: leading.leaseConfirmed",
    })
    .waitFor();

  // Its run ended: the tree sends no status, and the page shows none.
  backend.trees.push(tree(runnable("root.curator", { state: "DEAD", lastError: "boom" })));
  await page.locator(`${curatorRow}[data-state=DEAD]`).waitFor();
  await expect(page.locator(`${curatorRow} [data-testid=runnable-status]`).count()).resolves.toBe(
    0,
  );
});
