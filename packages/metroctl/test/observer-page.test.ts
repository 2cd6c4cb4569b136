/**
 * The observer's page in Chromium, against its real server with a backend
 * the test feeds: 1,000 nodes render as a windowed list (few rows in the
 * DOM, the last one reachable by scrolling), a node that stops heartbeating
 * turns unhealthy, and an action goes through its confirmation step, with
 * the API's refusal shown word for word. Timings are printed, not asserted.
 */
import { status } from "@grpc/grpc-js";
import { eventually } from "@metropolis/supervisor/testing";
import { ObserverServer } from "../src/observe/observer-server";
import { defaultUiDir } from "../src/observe/static-files";
import { ObserverBrowser } from "../src/observer-browser";
import { FakeBackend, fakeNode, fakeNodeId, serviceError } from "./observer-fixture";

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

const row = (id: string) => `[data-testid=node-list] [data-node-id="${id}"]`;

test("1,000 nodes: windowed, scrollable, live, with a confirmed action", async () => {
  const { page } = browser;
  const nodes = Array.from({ length: 1000 }, (_, i) =>
    fakeNode(i, { heartbeatAt: Date.now() - 500 }),
  );
  nodes[999] = { ...nodes[999], state: "NEW", roles: [], health: "UNKNOWN", heartbeatAt: null };
  await page.goto(server.url);
  const started = Date.now();
  backend.clusterChannel.push({ nodes, leaderId: fakeNodeId(0) });
  await page.locator("[data-testid=node-count]", { hasText: /^1000$/ }).waitFor();
  await page.locator(row(fakeNodeId(0))).waitFor();
  const firstRenderMs = Date.now() - started;
  const rowsInDom = await page.locator("[data-testid=node-list] [data-node-id]").count();
  expect(rowsInDom).toBeLessThan(60);
  await expect(page.locator("[data-testid=leader]").textContent()).resolves.toBe(fakeNodeId(0));

  // Scrolling to the end shows the last node, still with few rows in the DOM.
  const scrollStarted = Date.now();
  await page.locator("[data-testid=node-list]").evaluate((el) => (el.scrollTop = el.scrollHeight));
  await page.locator(row(fakeNodeId(999))).waitFor();
  const scrollMs = Date.now() - scrollStarted;
  expect(await page.locator("[data-testid=node-list] [data-node-id]").count()).toBeLessThan(60);

  // A node that stops heartbeating turns visibly unhealthy.
  const changeStarted = Date.now();
  backend.clusterChannel.push({
    nodes: nodes.map((n, i) => (i === 990 ? { ...n, health: "HEARTBEAT_TIMEOUT" } : n)),
    leaderId: fakeNodeId(0),
  });
  await page.locator(`${row(fakeNodeId(990))}[data-health=HEARTBEAT_TIMEOUT]`).waitFor();
  const changeMs = Date.now() - changeStarted;
  await expect(
    page
      .locator(`${row(fakeNodeId(990))} .badge`)
      .first()
      .textContent(),
  ).resolves.toBe("HEARTBEAT_TIMEOUT");

  // Approve: refused by the API first (its message is shown), then confirmed.
  backend.refuseWith = serviceError(status.FAILED_PRECONDITION, "node is not NEW");
  await page.locator(`${row(fakeNodeId(999))} [data-action=approve]`).click();
  await page.locator("[data-testid=confirm]").click();
  await expect(page.locator("[data-testid=action-result]").textContent()).resolves.toBe(
    "FAILED_PRECONDITION: node is not NEW",
  );
  await page.getByRole("button", { name: "Close" }).click();
  await page.locator(`${row(fakeNodeId(999))} [data-action=approve]`).click();
  await page.locator("[data-testid=confirm]").click();
  await expect(page.locator("[data-testid=action-result]").textContent()).resolves.toBe(
    `node ${fakeNodeId(999)} approved`,
  );
  expect(backend.calls).toEqual([
    { kind: "approve", id: fakeNodeId(999) },
    { kind: "approve", id: fakeNodeId(999) },
  ]);
  await page.getByRole("button", { name: "Close" }).click();

  // Labels through the form, its review and confirmation.
  await page.locator(`${row(fakeNodeId(999))} [data-action=labels]`).click();
  await page.locator("[data-testid=label-changes]").fill("zone=a rack-");
  await page.getByRole("button", { name: "Review…" }).click();
  await page.locator("[data-testid=confirm]").click();
  await page.locator("[data-testid=action-result].ok").waitFor();
  expect(backend.calls[2]).toEqual({
    kind: "labels",
    id: fakeNodeId(999),
    change: { changes: ["zone=a", "rack-"] },
  });

  process.stdout.write(
    `observer page, 1,000 nodes in Chromium: first render ${firstRenderMs} ms, ${rowsInDom} rows in the DOM, ` +
      `scroll to the end ${scrollMs} ms, a node turning unhealthy shown ${changeMs} ms after the look\n`,
  );
});

test("the consensus view shows the etcd voters and learners, the curator and raft leaders with their terms, and the fault tolerance", async () => {
  const { page } = browser;
  // A fresh load: the previous test leaves its action dialog open.
  const opened = backend.clusterOpened;
  await page.goto("about:blank");
  await page.goto(server.url);
  await page.locator("nav a", { hasText: "Consensus" }).click();
  // Pushed once only this page's cluster feed reads (the previous page's stops when it leaves).
  await eventually(
    () => backend.clusterOpened > opened && backend.clusterOpen === 1,
    "the new page's cluster feed runs alone",
  );
  backend.clusterChannel.push({
    nodes: [
      fakeNode(0),
      fakeNode(1),
      fakeNode(2, { curator: { running: false, port: null, leader: false } }),
    ],
    leaderId: fakeNodeId(0),
  });
  backend.consensusChannel.push({
    members: [
      {
        nodeId: fakeNodeId(0),
        memberId: "8e9e05c52164694d",
        status: "voter",
        raftLeader: false,
        reachability: "reachable",
        curatorRunning: true,
      },
      {
        nodeId: fakeNodeId(1),
        memberId: "91bc3c398fb3c146",
        status: "voter",
        raftLeader: true,
        reachability: "reachable",
        curatorRunning: true,
      },
      {
        nodeId: "",
        memberId: "fd422379fda50e48",
        status: "learner",
        raftLeader: false,
        reachability: "unreachable",
        curatorRunning: false,
      },
    ],
    leader: { nodeId: fakeNodeId(0), host: "10.0.0.1", port: 7835, term: 42 },
    raft: { leaderMemberId: "91bc3c398fb3c146", term: 6 },
    faultTolerance: { voters: 2, learners: 1, quorum: 2, tolerates: 0, unreachableVoters: 0 },
  });
  await page.locator("[data-testid=consensus-term]", { hasText: /^42$/ }).waitFor();
  await expect(page.locator("[data-testid=consensus-leader]").textContent()).resolves.toBe(
    fakeNodeId(0),
  );
  await expect(page.locator("[data-testid=consensus-voters]").textContent()).resolves.toBe("2");
  await expect(page.locator("[data-testid=consensus-learners]").textContent()).resolves.toBe("1");
  const learner = page.locator(
    '[data-testid=consensus-members] [data-member-id="fd422379fda50e48"]',
  );
  await expect(learner.getAttribute("data-status")).resolves.toBe("learner");
  await expect(learner.textContent()).resolves.toContain("not started yet");
  await expect(
    page
      .locator('[data-testid=consensus-members] [data-member-id="8e9e05c52164694d"] .leader')
      .count(),
  ).resolves.toBe(1);
  // The raft leader is not the curator leader here: each is marked on its own member.
  await expect(page.locator("[data-testid=consensus-raft-leader]").textContent()).resolves.toBe(
    fakeNodeId(1),
  );
  await expect(page.locator("[data-testid=consensus-raft-term]").textContent()).resolves.toBe("6");
  const raftLeaders = page.locator('[data-testid=consensus-members] tr[data-raft-leader="yes"]');
  await expect(raftLeaders.count()).resolves.toBe(1);
  await expect(raftLeaders.getAttribute("data-member-id")).resolves.toBe("91bc3c398fb3c146");
  await expect(learner.getAttribute("data-reachability")).resolves.toBe("unreachable");
  // The summary `metroctl cluster members` prints: two voters survive no failure.
  const tolerance = page.locator("[data-testid=consensus-fault-tolerance]");
  await expect(tolerance.textContent()).resolves.toBe("2 voters, 1 learner: not fault tolerant");
  await expect(tolerance.getAttribute("class")).resolves.toContain("not-tolerant");
  // node2 holds the consensus role (fakeNode gives it to nodes 0–2) but etcd names no member after it.
  await expect(page.locator("[data-testid=consensus-waiting]").textContent()).resolves.toContain(
    fakeNodeId(2),
  );
  // Nothing on the page says the API does not report it any more.
  await expect(page.getByText("not reported by the API").count()).resolves.toBe(0);
});
