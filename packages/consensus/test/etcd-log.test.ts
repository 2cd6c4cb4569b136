import { MockContext } from "@metropolis/supervisor/testing";
import { logEtcdLine } from "../src/etcd-log";

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
