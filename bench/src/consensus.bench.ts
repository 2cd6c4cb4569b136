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
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import {
  ConsensusService,
  localTimings,
  type ConsensusStatus,
  type JoinCluster,
} from "@metropolis/consensus";
import { waitFor } from "@metropolis/event";
import { placeNodeRoot } from "@metropolis/localstorage";
import { generateKeyPair, nodeIdFromPublicKey } from "@metropolis/pki";
import { supervise, type Supervisor } from "@metropolis/supervisor";
import winston from "winston";
import { median, printTable, writeReport, type Row } from "./report";

const ROUNDS = 5;
type Running = Extract<ConsensusStatus, { state: "running" }>;

const quiet = () =>
  winston.createLogger({ transports: [new winston.transports.Console({ silent: true })] });

async function freePort(host: string): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) =>
    server.once("error", reject).listen(0, host, resolve),
  );
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

interface Member {
  service: ConsensusService;
  supervisor: Supervisor;
  status: Running;
}

async function node(dir: string, n: number) {
  const { privateKey, publicKey } = generateKeyPair();
  const nodeId = nodeIdFromPublicKey(publicKey);
  const storage = placeNodeRoot(join(dir, `node${n}`));
  await storage.data.mountNew("insecure");
  await storage.ephemeral.wipe();
  const host = `127.0.0.${10 + n}`;
  return { nodeId, privateKey, publicKey, storage, peer: { host, port: await freePort(host) } };
}

async function start(
  n: Awaited<ReturnType<typeof node>>,
  mode: { bootstrap?: boolean; join?: JoinCluster },
): Promise<Member> {
  const service = new ConsensusService({
    nodeId: n.nodeId,
    nodePrivateKey: n.privateKey,
    storage: n.storage,
    peer: n.peer,
    timings: localTimings,
    autopromoteIntervalMs: 20,
    ...mode,
  });
  const supervisor = supervise(
    async (ctx) => {
      ctx.run("consensus", service.run);
      ctx.healthy();
      await ctx.untilAborted();
    },
    { logger: quiet() },
  );
  const status = (await waitFor(
    service.status,
    (s) => s.state === "running",
    AbortSignal.timeout(30_000),
  )) as Running;
  return { service, supervisor, status };
}

async function round(): Promise<{ bootstrap: number; restart: number; join: number }> {
  const dir = await mkdtemp(join(tmpdir(), "bench-consensus-"));
  try {
    const a = await node(dir, 0);
    let t = performance.now();
    let first = await start(a, { bootstrap: true });
    const bootstrap = performance.now() - t;

    await first.supervisor.stop({ timeoutMs: 20_000 });
    const reopened = { ...a, storage: placeNodeRoot(join(dir, "node0")) };
    await reopened.storage.data.mountExisting({ policy: "insecure" });
    t = performance.now();
    first = await start(reopened, {});
    const restart = performance.now() - t;

    const b = await node(dir, 1);
    t = performance.now();
    const joinData = await first.status.addNode(b.nodeId, b.publicKey, b.peer);
    const second = await start(b, { join: joinData });
    for (;;) {
      const members = await first.status.members();
      if (members.every((m) => !m.isLearner && m.name !== "")) break;
      await new Promise((r) => setTimeout(r, 5));
    }
    const joined = performance.now() - t;
    await second.supervisor.stop({ timeoutMs: 20_000 });
    await first.supervisor.stop({ timeoutMs: 20_000 });
    return { bootstrap, restart, join: joined };
  } finally {
    await rm(dir, { recursive: true, force: true });
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
