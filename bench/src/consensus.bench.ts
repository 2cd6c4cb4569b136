/**
 * Consensus benchmark: `npm run bench:consensus`.
 *
 * How long this machine takes to (a) spawn a new one-member etcd cluster
 * until it serves (bootstrap: CA, certificates, process start, leader
 * election, CA stored), (b) restart that member from its data until it
 * serves, and (c) add a second member through addNode until it serves and is
 * promoted to a voter. Local raft timings (10 ms heartbeat, 100 ms election),
 * as the local cluster and the tests use. Median of several rounds; prints a
 * table and writes reports/bench-consensus.json.
 */
import { performance } from "node:perf_hooks";
import { runTestMember, testNode } from "@metropolis/consensus/testing";
import { median, printTable, writeReport, type Row } from "./report";

const ROUNDS = 5;

async function round(): Promise<{ bootstrap: number; restart: number; join: number }> {
  const a = await testNode("bench-a");
  const b = await testNode("bench-b");
  try {
    let t = performance.now();
    let first = await runTestMember(a, { bootstrap: true });
    const bootstrap = performance.now() - t;

    await first.harness.cleanup({ timeoutMs: 20_000 });
    a.storage = await a.reopen();
    t = performance.now();
    first = await runTestMember(a, {});
    const restart = performance.now() - t;

    t = performance.now();
    const join = await first.status.addNode(b.nodeId, b.publicKey, b.peer);
    const second = await runTestMember(b, { join });
    while (!(await first.status.members()).every((m) => !m.isLearner && m.name !== "")) {
      await new Promise((r) => setTimeout(r, 5));
    }
    const joined = performance.now() - t;
    await second.harness.cleanup({ timeoutMs: 20_000 });
    await first.harness.cleanup({ timeoutMs: 20_000 });
    return { bootstrap, restart, join: joined };
  } finally {
    await a.remove();
    await b.remove();
  }
}

async function main(): Promise<void> {
  const results = [];
  for (let i = 0; i < ROUNDS; i++) results.push(await round());
  const rows: Row[] = [
    {
      measure: "(a) bootstrap: spawn to serving",
      value: median(results.map((r) => r.bootstrap)),
      unit: "ms",
    },
    {
      measure: "(b) restart from disk to serving",
      value: median(results.map((r) => r.restart)),
      unit: "ms",
    },
    {
      measure: "(c) join: addNode to serving and promoted",
      value: median(results.map((r) => r.join)),
      unit: "ms",
    },
  ];
  printTable(`consensus (median of ${ROUNDS} rounds)`, rows);
  await writeReport("bench-consensus.json", rows);
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
