/**
 * `metroctl cluster health` against a real curator leader (one etcd voter,
 * real mutual TLS): every check in its fixed order, as a table and as JSON,
 * the exit status following the verdicts; and without a reachable leader,
 * the one failing `curator-leader` check and exit status 1. The checks'
 * judgement of every shape of cluster is in the curator's
 * cluster-health.test.ts; the 3-node cluster with a node stopped in
 * e2e/health-support.test.ts.
 */
import type { ClusterHealthView } from "../src/health-view";
import { healthSummary } from "../src/health-view";
import { metroctl, startCluster, type MetroctlCluster } from "./cluster-fixture";

let cluster: MetroctlCluster;
let config: string;

beforeAll(async () => {
  cluster = await startCluster();
  config = await cluster.ownerConfig();
}, 30_000);

afterAll(async () => {
  await cluster?.stop();
});

const names = [
  "curator-leader",
  "nodes-up",
  "etcd-members",
  "etcd-voters",
  "etcd-alarms",
  "etcd-database-size",
  "clock-skew",
  "access-expiry",
  "versions",
];

it("lists every check of the leader, in order, with its verdict; the exit status follows them", async () => {
  const res = await metroctl(config, ["cluster", "health", "-o", "json"]);
  expect(res.stderr).toBe("");
  const view: ClusterHealthView = JSON.parse(res.stdout);
  expect(view.checks.map((c) => c.name)).toEqual(names);
  const firstId = cluster.leader.firstNode.nodeId;
  expect(view.leaderNodeId).toBe(firstId);
  expect(view.checks[0]).toMatchObject({
    verdict: "ok",
    detail: expect.stringMatching(new RegExp(`^node ${firstId} leads \\(term \\d+\\)$`)),
  });
  const byName = new Map(view.checks.map((c) => [c.name, c]));
  expect(byName.get("etcd-voters")).toMatchObject({ verdict: "ok", detail: "1 voters" });
  expect(byName.get("etcd-alarms")).toMatchObject({ verdict: "ok", detail: "none raised" });
  expect(byName.get("etcd-database-size")?.verdict).toBe("ok");
  expect(byName.get("etcd-database-size")?.detail).toMatch(/^\d+\.\d MiB of 2048\.0 MiB/);
  expect(res.code).toBe(view.verdict === "fail" ? 1 : 0);

  const text = await metroctl(config, ["cluster", "health"]);
  const lines = text.stdout.trimEnd().split("\n");
  expect(lines[0].split(/\s{2,}/)).toEqual(["VERDICT", "CHECK", "DETAIL"]);
  expect(lines.slice(1, 1 + names.length).map((l) => l.split(/\s{2,}/)[1])).toEqual(names);
  expect(lines[1]).toMatch(/^ok\s+curator-leader\s+node /);
  expect(lines.at(-1)).toMatch(/^(healthy|unhealthy: )/);
  expect(text.code).toBe(lines.at(-1)?.startsWith("unhealthy") ? 1 : 0);
});

it("fails the curator-leader check, exit status 1, when no curator leader answers", async () => {
  const res = await metroctl(config, [
    "--endpoints",
    "127.0.0.1:1",
    "--dial-timeout",
    "1",
    "cluster",
    "health",
    "-o",
    "json",
  ]);
  expect(res.code).toBe(1);
  const view: ClusterHealthView = JSON.parse(res.stdout);
  expect(view).toMatchObject({ verdict: "fail", leaderNodeId: null, checkedAt: null });
  expect(view.checks).toHaveLength(1);
  expect(view.checks[0]).toMatchObject({ name: "curator-leader", verdict: "fail" });
  expect(view.checks[0].detail).toMatch(/^no curator leader answered: /);
  expect(healthSummary(view)).toBe("unhealthy: 1 check failed (curator-leader)");
});

it("words the summary line", () => {
  const check = (name: string, verdict: "ok" | "warn" | "fail") => ({
    name,
    title: "",
    verdict,
    detail: "",
    nodeIds: [],
  });
  const view = (checks: ClusterHealthView["checks"]): ClusterHealthView => ({
    verdict: "ok",
    leaderNodeId: null,
    checkedAt: null,
    checks,
  });
  expect(healthSummary(view([check("a", "ok")]))).toBe("healthy");
  expect(healthSummary(view([check("a", "ok"), check("versions", "warn")]))).toBe(
    "healthy, with 1 warning (versions)",
  );
  expect(
    healthSummary(
      view([check("a", "fail"), check("b", "fail"), check("c", "warn"), check("d", "warn")]),
    ),
  ).toBe("unhealthy: 2 checks failed (a, b); 2 warnings (c, d)");
});
