/**
 * e2e node management: one real node (bootstrapped, on its own loopback
 * /24) and the owner's metroctl. `node logs` reads the node's own log tree
 * through NodeManagement; `node reboot` of the only etcd voter is refused by
 * the curator's quorum check, and with `--force` makes the node stop gracefully and
 * exit with the reboot status (75), local-cluster starts it again with the
 * same root and config, and it comes back as itself, UP and HEALTHY;
 * `node poweroff --force` makes it exit 0, and it stays stopped.
 * `cluster defrag --node` of the only voter is refused the same way, and
 * with `--force` the node defragments its own etcd member
 * (NodeManagement.DefragmentMember), after a warning that it runs the
 * curator leader.
 */
import { rebootExitStatus } from "@metropolis/node";
import { eventually } from "@metropolis/supervisor/testing";
import { E2eCluster } from "./e2e-cluster";

jest.setTimeout(240_000);

let e2e: E2eCluster;

beforeAll(async () => {
  e2e = await E2eCluster.create("node-management", { nodes: 1 });
  await e2e.up();
});

afterAll(async () => {
  await e2e?.teardown();
});

it("node logs: the node's own entries, by level, DN exactly, backlog, concise", async () => {
  const node = e2e.node(1);
  const logs = async (...flags: string[]) => {
    const res = await e2e.cluster.metroctl(["node", "logs", node.id, ...flags]);
    expect(res).toMatchObject({ exitCode: 0, stderr: "" });
    return res.stdout
      .trimEnd()
      .split("\n")
      .filter((l) => l !== "");
  };
  // `time level dn message [meta]`
  const full = await logs("--level", "info", "--backlog", "5");
  expect(full.length).toBe(5);
  const parsed = full.map((l) => /^\S+Z (info|warn|error) (\S+) /.exec(l));
  expect(parsed).not.toContain(null);
  const dn = parsed[0]![2];
  const exact = await logs("--dn", dn, "--exact", "--backlog", "all");
  expect(exact.length).toBeGreaterThan(0);
  for (const line of exact) expect(line.split(" ")[2]).toBe(dn);
  // `time level message`: the last (at most) 2 of the same entries, without the DN.
  const concise = await logs("--dn", dn, "--exact", "--backlog", "2", "--concise");
  const after = await logs("--dn", dn, "--exact", "--backlog", "all");
  const shortened = after.map((l) => {
    const [time, level, , ...message] = l.split(" ");
    return [time, level, ...message].join(" ");
  });
  expect(concise).toHaveLength(Math.min(2, exact.length));
  for (const line of concise) expect(shortened.some((l) => l.startsWith(line))).toBe(true);
});

it("cluster defrag --node: refused for the only voter; forced, the node defragments its own member", async () => {
  const node = e2e.node(1);
  const refused = await e2e.cluster.metroctl(["cluster", "defrag", "--node", node.id]);
  expect(refused.exitCode).toBe(1);
  expect(refused.stderr).toMatch(
    /^metroctl: cluster defrag: FAILED_PRECONDITION: defragmenting node \S+ is refused: afterwards 0 healthy voters would remain, fewer than the quorum of 1/,
  );
  const res = await e2e.cluster.metroctl(["cluster", "defrag", "--node", node.id, "--force"]);
  expect(res).toEqual({
    exitCode: 0,
    stderr: expect.stringMatching(
      new RegExp(
        `^metroctl: cluster defrag: --force: the stall of node ${node.id}'s etcd member is not quorum-checked; .*\n` +
          `metroctl: cluster defrag: node ${node.id} runs the curator leader: .*may make the curator leader step down`,
      ),
    ),
    stdout: expect.stringMatching(
      new RegExp(
        `^etcd member [0-9a-f]+ \\(node ${node.id}\\) defragmented: \\d+ -> \\d+ bytes\n$`,
      ),
    ),
  });
  // One a minute per node: the node refuses another at once.
  const again = await e2e.cluster.metroctl(["cluster", "defrag", "--node", node.id, "--force"]);
  expect(again.exitCode).toBe(1);
  expect(again.stderr).toMatch(
    /RESOURCE_EXHAUSTED: the last defragmentation ended \d+ s ago: ask again in \d+ s/,
  );
});

it("node reboot: the node exits 75, local-cluster starts it again, it comes back UP", async () => {
  const node = e2e.node(1);
  const before = node.process!;
  // The only etcd voter: the curator's quorum check refuses, and the node is not asked.
  const refused = await e2e.cluster.metroctl(["node", "reboot", node.id]);
  expect(refused.exitCode).toBe(1);
  expect(refused.stderr).toMatch(
    /^metroctl: node reboot: FAILED_PRECONDITION: rebooting node \S+ is refused: afterwards 0 healthy voters would remain, fewer than the quorum of 1/,
  );
  expect(before.running).toBe(true);
  const res = await e2e.cluster.metroctl(["node", "reboot", node.id, "--force"]);
  expect(res).toEqual({
    exitCode: 0,
    stderr: expect.stringMatching(
      /^metroctl: node reboot: --force: taking node \S+ away is not quorum-checked; /,
    ),
    stdout: `node ${node.id} is rebooting\n`,
  });
  const exit = await e2e.measure("node rebooting: exit", () => before.exited);
  expect(exit).toEqual({ code: rebootExitStatus, signal: null });
  await eventually(() => node.process !== before, "local-cluster to start the node again", {
    timeoutMs: 10_000,
  });
  const after = node.process!;
  expect(after.root).toBe(before.root);
  await e2e.measure("node rebooted: rejoined, UP and HEALTHY", async () => {
    const { nodeId } = await after.waitForProgress("cluster.enrolled", 90_000, {
      where: (e) => e.flow === "rejoin",
    });
    expect(nodeId).toBe(node.id);
    await e2e.cluster.waitFor(node, { state: "UP", health: "HEALTHY" });
  });
});

it("node poweroff: the node exits 0 and stays stopped", async () => {
  const node = e2e.node(1);
  const proc = node.process!;
  expect(proc.running).toBe(true);
  // The node's NodeManagement service starts once it has its credentials back.
  let res: Awaited<ReturnType<typeof e2e.cluster.metroctl>> | undefined;
  await eventually(
    async () => {
      // Forced: the only etcd voter (see the reboot).
      res = await e2e.cluster.metroctl(["node", "poweroff", node.id, "--force"]);
      return res.exitCode === 0;
    },
    "the node to take the poweroff",
    { timeoutMs: 30_000, intervalMs: 500 },
  );
  expect(res).toEqual({
    exitCode: 0,
    stderr: expect.stringMatching(/^metroctl: node poweroff: --force: /),
    stdout: `node ${node.id} is powering off\n`,
  });
  expect(await proc.exited).toEqual({ code: 0, signal: null });
  // Well past the moment a restart would have happened.
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  expect(node.process).toBe(proc);
  expect(node.process!.running).toBe(false);
});
