import { supervise, type LogEntry } from "@metropolis/supervisor";
import { testHarness, type TestHarness } from "@metropolis/supervisor/testing";
import winston from "winston";
import Transport from "winston-transport";
import { deferred, serve } from "./helpers";

let h: TestHarness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

describe("log tree", () => {
  it("keeps each DN's lines and answers by DN prefix, oldest first", async () => {
    h = testHarness(async (ctx) => {
      ctx.logger.info("root line");
      ctx.run("cluster", async (c) => {
        c.logger.info("cluster line 1");
        c.run("consensus", async (cc) => {
          cc.logger.warn("consensus line", { peer: "127.0.0.2" });
          await serve(cc);
        });
        c.subLogger("enrolment").info("enrolment line");
        c.logger.info("cluster line 2");
        await serve(c);
      });
      ctx.run("clusterish", async (c) => (c.logger.info("not in root.cluster"), serve(c)));
      await serve(ctx);
    });
    await h.waitFor("root.cluster.consensus", "healthy");
    await h.waitFor("root.clusterish", "healthy");
    const cluster = h.supervisor.logs("root.cluster");
    expect(cluster.map((l) => `${l.dn} ${l.level} ${l.message}`)).toEqual([
      "root.cluster info cluster line 1",
      "root.cluster.consensus warn consensus line",
      "root.cluster.enrolment info enrolment line",
      "root.cluster info cluster line 2",
    ]);
    expect(cluster[1].meta).toEqual({ peer: "127.0.0.2" });
    expect(h.supervisor.logs("root.cluster", { tail: 2 }).map((l) => l.message)).toEqual([
      "enrolment line",
      "cluster line 2",
    ]);
    expect(h.supervisor.logs("root").map((l) => l.message)).toContain("not in root.cluster");
    expect(h.supervisor.logs("root.cluster.consensus")).toHaveLength(1);
  });

  it("bounds every DN's buffer separately", async () => {
    h = testHarness(
      async (ctx) => {
        ctx.run("chatty", async (c) => {
          for (let i = 0; i < 10; i++) c.logger.info(`chatty ${i}`);
          await serve(c);
        });
        ctx.run("quiet", async (c) => (c.logger.info("quiet 0"), serve(c)));
        await serve(ctx);
      },
      { logBufferLines: 3 },
    );
    await h.waitFor("root.chatty", "healthy");
    await h.waitFor("root.quiet", "healthy");
    expect(h.supervisor.logs("root.chatty").map((l) => l.message)).toEqual([
      "chatty 7",
      "chatty 8",
      "chatty 9",
    ]);
    expect(h.supervisor.logs("root.quiet").map((l) => l.message)).toEqual(["quiet 0"]);
  });

  it("sends every line to the root logger's transports with its DN, and keeps only enabled levels", async () => {
    const seen: Array<{ level: string; message: unknown; dn: unknown }> = [];
    class Sink extends Transport {
      override log(info: winston.Logform.TransformableInfo, next: () => void) {
        seen.push({ level: info.level, message: info.message, dn: info.dn });
        next();
      }
    }
    const logger = winston.createLogger({ level: "info", transports: [new Sink()] });
    const sup = supervise(
      async (ctx) => {
        ctx.logger.debug("too verbose");
        ctx.logger.info("hello");
        await serve(ctx);
      },
      { logger },
    );
    await new Promise((r) => setImmediate(r));
    expect(seen).toEqual([{ level: "info", message: "hello", dn: "root" }]);
    expect(sup.logs("root").map((l) => l.message)).toEqual(["hello"]);
    await sup.stop();
  });

  it("tells subscribers every new line, as logs() keeps it, until they unsubscribe", async () => {
    const logger = winston.createLogger({
      level: "info",
      transports: [new winston.transports.Console({ silent: true })],
    });
    const seen: string[] = [];
    const seenEntries: LogEntry[] = [];
    const more = deferred();
    const sup = supervise(
      async (ctx) => {
        ctx.run("child", async (c) => {
          c.logger.info("child line", { k: 1 });
          c.logger.debug("too verbose");
          c.subLogger("sub").warn("sub line");
          c.healthy();
          await more.promise;
          c.logger.info("after unsubscribe");
          await c.untilAborted();
        });
        ctx.logger.info("root line");
        await serve(ctx);
      },
      { logger },
    );
    const unsubscribe = sup.onLog((e) => {
      seen.push(`${e.dn} ${e.level} ${e.message}`);
      seenEntries.push(e);
    });
    const healthy = new Promise<void>((resolve) =>
      sup.onTransition((t) => t.dn === "root" && t.to === "healthy" && resolve()),
    );
    await healthy;
    expect(seen).toEqual([
      "root.child info child line",
      "root.child.sub warn sub line",
      "root info root line",
    ]);
    expect(seenEntries).toEqual(sup.logs("root"));
    expect(seenEntries[0].meta).toEqual({ k: 1 });
    unsubscribe();
    const logged = new Promise<void>((resolve) =>
      sup.onLog((e) => e.message === "after unsubscribe" && resolve()),
    );
    more.resolve();
    await logged;
    expect(seen).toHaveLength(3);
    await sup.stop();
  });

  it("rejects a nonsensical buffer size", () => {
    expect(() => supervise(serve, { logBufferLines: 0 })).toThrow(
      "logBufferLines must be a positive integer",
    );
  });
});
