/**
 * The wire between a node and its drivers: a progress event logged through
 * the node's own JSON logger comes back, typed, from `parseNodeLine` — the
 * path every wait of the local cluster and the e2e tests takes — whatever
 * the message says; a malformed or unknown event is not taken for one.
 */
import { PassThrough } from "node:stream";
import { nodeLogger } from "@metropolis/node";
import {
  logProgress,
  type NodeProgressEvent,
  readProgressEvent,
} from "@metropolis/supervisor/node-progress";
import { parseNodeLine } from "../src/node-process";

/** The lines `log` writes through the node's JSON logger, parsed as NodeProcess parses them. */
async function throughNodeLogger(log: (logger: ReturnType<typeof nodeLogger>) => void) {
  const stream = new PassThrough();
  const logger = nodeLogger({ tty: false, stream, level: "info" });
  const written: string[] = [];
  stream.on("data", (chunk: Buffer) => written.push(...chunk.toString().split("\n")));
  log(logger);
  await new Promise<void>((resolve) => {
    logger.on("finish", resolve);
    logger.end();
  });
  return written.filter((l) => l !== "").map((raw, i) => parseNodeLine(raw, "node1", "stdout", i));
}

const events: NodeProgressEvent[] = [
  { event: "cluster.enrolled", nodeId: "metropolis-0a", flow: "bootstrap" },
  { event: "cluster.enrolled", nodeId: "metropolis-0b", flow: "register" },
  { event: "cluster.enrolled", nodeId: "metropolis-0c", flow: "rejoin" },
  { event: "consensus.serving", nodeId: "metropolis-0a" },
  { event: "consensus.promoted", nodeId: "metropolis-0b" },
  { event: "curator.leading", nodeId: "metropolis-0a", address: "127.0.0.2:7835" },
  { event: "curator.handed-over", nodeId: "metropolis-0a" },
  { event: "status.pushed", address: "127.0.0.2", curatorPort: 7835 },
  { event: "status.pushed", address: "127.0.0.3", curatorPort: null },
  { event: "workloads.changed", worker: true, workloads: ["web", "db"] },
  { event: "workloads.changed", worker: false, workloads: [] },
];

describe("node progress events in the node's log lines", () => {
  it("come back typed from the node's JSON lines, whatever the message", async () => {
    const lines = await throughNodeLogger((logger) => {
      logger.info("an ordinary line");
      for (const [i, event] of events.entries()) logProgress(logger, `reworded ${i}`, event);
    });
    expect(lines[0]?.progress).toBeUndefined();
    expect(lines.slice(1).map((l) => l.progress)).toEqual(events);
    expect(lines.slice(1).map((l) => l.message)).toEqual(events.map((_, i) => `reworded ${i}`));
  });

  it("are not read from a malformed or unknown progress field", () => {
    for (const progress of [
      undefined,
      null,
      "cluster.enrolled",
      { event: "cluster.enlisted", nodeId: "metropolis-0a" },
      { event: "cluster.enrolled", nodeId: "metropolis-0a", flow: "adopt" },
      { event: "cluster.enrolled", flow: "rejoin" },
      { event: "consensus.serving", nodeId: 7 },
      { event: "curator.leading", nodeId: "metropolis-0a" },
      { event: "status.pushed", address: "127.0.0.2" },
      { event: "status.pushed", address: "127.0.0.2", curatorPort: "7835" },
      { event: "workloads.changed", worker: true, workloads: ["web", 7] },
      { event: "workloads.changed", workloads: [] },
    ]) {
      expect(readProgressEvent({ progress })).toBeUndefined();
    }
    expect(readProgressEvent(undefined)).toBeUndefined();
  });
});
