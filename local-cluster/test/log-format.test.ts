/**
 * What a failed run shows of a node's log (formatTrouble): its last
 * warnings, errors and stderr lines, etcd's warnings among them, with their
 * times; nothing else.
 */
import { formatTrouble } from "../src/log-format";
import { parseNodeLine } from "../src/node-process";

const json = (seq: number, level: string, dn: string, message: string) =>
  parseNodeLine(
    JSON.stringify({ time: `2026-11-28T03:03:1${seq}.123Z`, level, dn, message, meta: {} }),
    "node1",
    "stdout",
    seq,
  );

it("keeps the last warnings, errors and stderr lines, oldest first, with their times", () => {
  const lines = [
    json(0, "warn", "root.curator", "first warning"),
    json(1, "info", "root.curator", "elected leader"),
    json(2, "warn", "root.roleserver.controlplane.consensus.etcd", "slow fdatasync"),
    parseNodeLine("Error: boom", "node1", "stderr", 3),
    json(4, "error", "root.curator", "Management.UpdateNodeRoles failed"),
  ];
  expect(formatTrouble(lines, 3)).toEqual([
    "03:03:12.123 [node1] WARN root.roleserver.controlplane.consensus.etcd: slow fdatasync",
    "[node1] stderr: Error: boom",
    "03:03:14.123 [node1] ERROR root.curator: Management.UpdateNodeRoles failed",
  ]);
});

it("shows nothing of a log without trouble", () => {
  expect(formatTrouble([json(1, "info", "root.curator", "elected leader")], 20)).toEqual([]);
});
