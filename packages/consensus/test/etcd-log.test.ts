import { MockContext } from "@metropolis/supervisor/testing";
import { logEtcdLine, refusesJoinForNow, reportsMemberRemoved } from "../src/etcd-log";

describe("etcd log lines", () => {
  it("keep etcd's level, message and fields", async () => {
    const ctx = new MockContext("root.consensus.etcd");
    logEtcdLine(
      JSON.stringify({
        level: "warn",
        ts: "2026-11-22T02:11:30.381Z",
        caller: "etcdserver/server.go:1",
        msg: "slow fdatasync",
        took: "1.2s",
      }),
      "stderr",
      ctx.logger,
    );
    logEtcdLine(
      JSON.stringify({ level: "fatal", msg: "cannot access data directory" }),
      "stderr",
      ctx.logger,
    );
    logEtcdLine("not json at all", "stderr", ctx.logger);
    logEtcdLine(
      JSON.stringify({ level: "info", msg: "ready to serve client requests" }),
      "stderr",
      ctx.logger,
    );
    await new Promise((r) => setImmediate(r));
    expect(ctx.lines.map((l) => [l.level, l.message])).toEqual([
      ["warn", "slow fdatasync"],
      ["error", "cannot access data directory"],
      ["warn", "not json at all"],
      ["info", "ready to serve client requests"],
    ]);
    expect(ctx.lines[0].meta).toMatchObject({ caller: "etcdserver/server.go:1", took: "1.2s" });
  });
});

// The lines the service acts on, each as etcd 3.4.23 wrote it, and lines that must not pass for it.
describe.each([
  {
    name: "reportsMemberRemoved",
    recognises: reportsMemberRemoved,
    what: "etcd's own report of this member's removal",
    // When its member was removed, running or at a restart.
    line: '{"level":"warn","ts":"2026-11-24T11:48:48.841Z","caller":"etcdserver/server.go:1078","msg":"server error","error":"the member has been permanently removed from the cluster"}',
    others: [
      // A peer that became inactive: the same words, but about dialling someone else.
      '{"level":"warn","msg":"peer became inactive (message send to peer failed)","error":"failed to dial d49e on stream MsgApp v2 (the member has been permanently removed from the cluster)"}',
      '{"level":"warn","msg":"server error","error":"etcdserver: request timed out"}',
      '{"level":"info","msg":"removed member","removed-remote-peer-id":"22470a620d4ee032"}',
      "the member has been permanently removed from the cluster",
    ],
  },
  {
    name: "refusesJoinForNow",
    recognises: refusesJoinForNow,
    what: "etcd's fatal line giving a join up because it could not check its version",
    // In CI, joining while its peer answered too late.
    line: '{"level":"fatal","ts":"2026-11-28T07:51:27.980Z","caller":"etcdmain/etcd.go:271","msg":"discovery failed","error":"incompatible with current running cluster","stacktrace":"go.etcd.io/etcd/etcdmain.startEtcdOrProxyV2"}',
    others: [
      // The warning etcd writes just before it: not the line the service acts on.
      '{"level":"warn","msg":"failed to start etcd","error":"incompatible with current running cluster"}',
      '{"level":"fatal","msg":"discovery failed","error":"member 8e9e05c52164694d has already been bootstrapped"}',
      "incompatible with current running cluster",
    ],
  },
])("$name", ({ recognises, what, line, others }) => {
  it(`recognises only ${what}`, () => {
    expect(recognises(line)).toBe(true);
    for (const other of [...others, ""]) expect(recognises(other)).toBe(false);
  });
});
