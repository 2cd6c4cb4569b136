import { supervise, type LogMeta, type Logger, type Supervisor } from "@metropolis/supervisor";
import { PrometheusSupervisorMetrics } from "@metropolis/supervisor/prometheus";
import { eventually } from "@metropolis/supervisor/testing";
import { Registry } from "prom-client";
import { serve } from "./helpers";

/** A logger that is not winston: what a service passing console or a pino adapter looks like. */
function recordingLogger(enabled: (level: string) => boolean = () => true) {
  const lines: { level: string; message: string; meta?: LogMeta }[] = [];
  const at =
    (level: string) =>
    (message: string, meta?: LogMeta): void => {
      lines.push({ level, message, meta });
    };
  const logger: Logger = {
    error: at("error"),
    warn: at("warn"),
    info: at("info"),
    debug: at("debug"),
    isLevelEnabled: enabled,
  };
  return { logger, lines };
}

let sup: Supervisor | undefined;
afterEach(async () => {
  await sup?.stop();
  sup = undefined;
});

describe("a root logger that is not winston", () => {
  it("gets every line with its dn, and the log tree keeps them", async () => {
    const { logger, lines } = recordingLogger();
    sup = supervise(
      async (ctx) => {
        ctx.run("child", async (c) => {
          c.logger.info("hello", { port: 1 });
          c.subLogger("sub").warn("careful");
          c.logger.child?.({ conn: 7 }).debug("from a child logger");
          await serve(c);
        });
        await serve(ctx);
      },
      { logger },
    );
    await eventually(() => lines.length >= 3, "three lines");
    expect(lines).toEqual([
      { level: "info", message: "hello", meta: { port: 1, dn: "root.child" } },
      { level: "warn", message: "careful", meta: { dn: "root.child.sub" } },
      { level: "debug", message: "from a child logger", meta: { conn: 7, dn: "root.child" } },
    ]);
    expect(sup.logs("root.child").map((e) => [e.dn, e.level, e.message, e.meta])).toEqual([
      ["root.child", "info", "hello", { port: 1 }],
      ["root.child.sub", "warn", "careful", undefined],
      ["root.child", "debug", "from a child logger", { conn: 7 }],
    ]);
  });

  it("skips the levels its isLevelEnabled turns off, in the log tree too", async () => {
    const { logger, lines } = recordingLogger((level) => level !== "debug");
    sup = supervise(
      async (ctx) => {
        ctx.logger.debug("hidden");
        ctx.logger.error("shown");
        await serve(ctx);
      },
      { logger },
    );
    await eventually(() => lines.length >= 1, "one line");
    expect(lines.map((l) => l.message)).toEqual(["shown"]);
    expect(sup.logs("root").map((e) => e.message)).toEqual(["shown"]);
  });

  it("may be console", async () => {
    const info = jest.spyOn(console, "info").mockImplementation(() => undefined);
    try {
      sup = supervise(
        async (ctx) => {
          ctx.logger.info("to the console");
          await serve(ctx);
        },
        { logger: console },
      );
      await eventually(() => info.mock.calls.length > 0, "console.info called");
      expect(info).toHaveBeenCalledWith("to the console", { dn: "root" });
    } finally {
      info.mockRestore();
    }
  });
});

describe("PrometheusSupervisorMetrics", () => {
  it("takes another metric name prefix", async () => {
    const registry = new Registry();
    sup = supervise(serve, {
      metrics: new PrometheusSupervisorMetrics(registry, { prefix: "svc_tree" }),
      logger: recordingLogger().logger,
    });
    await eventually(() => sup?.tree()[0]?.state === "healthy", "root healthy");
    const text = await registry.metrics();
    expect(text).toContain('svc_tree_node_state{dn="root",state="healthy"} 1');
    expect(text).toContain('svc_tree_transitions_total{dn="root",to="healthy"} 1');
    expect(text).not.toContain("metropolis_supervisor");
  });
});

describe("the default logger", () => {
  it("reads its level from the variable logLevelEnv names", async () => {
    process.env.SUPERVISOR_TEST_LEVEL = "error";
    const write = jest.spyOn(process.stdout, "write").mockImplementation(() => true);
    try {
      sup = supervise(
        async (ctx) => {
          ctx.logger.info("below the level");
          await serve(ctx);
        },
        { logLevelEnv: "SUPERVISOR_TEST_LEVEL" },
      );
      await eventually(() => sup?.tree()[0]?.state === "healthy", "root healthy");
      expect(sup.logs("root")).toEqual([]);
    } finally {
      write.mockRestore();
      delete process.env.SUPERVISOR_TEST_LEVEL;
    }
  });

  /** Runs `body` with stdout captured; returns the lines written. */
  async function captureStdout(body: () => Promise<void>): Promise<string[]> {
    const written: string[] = [];
    const write = jest.spyOn(process.stdout, "write").mockImplementation((chunk) => {
      written.push(String(chunk));
      return true;
    });
    try {
      await body();
    } finally {
      write.mockRestore();
    }
    return written;
  }

  it("writes one JSON object per line, level and message first, with its dn and fields", async () => {
    const isTTY = process.stdout.isTTY;
    process.stdout.isTTY = false;
    try {
      const written = await captureStdout(async () => {
        sup = supervise(async (ctx) => {
          ctx.logger.warn("disk almost full", { freeBytes: 1024 });
          ctx.logger.child?.({ conn: 7 }).info("from a child logger");
          await serve(ctx);
        });
        await eventually(() => sup?.logs("root").length === 2, "two lines");
      });
      expect(written).toHaveLength(2);
      for (const w of written) {
        expect(w.endsWith("\n")).toBe(true);
        expect(w.indexOf("\n")).toBe(w.length - 1);
      }
      const line: Record<string, unknown> = JSON.parse(written[0]);
      expect(line).toEqual({
        level: "warn",
        message: "disk almost full",
        freeBytes: 1024,
        dn: "root",
        timestamp: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      });
      expect(Object.keys(line).slice(0, 2)).toEqual(["level", "message"]);
      expect(JSON.parse(written[1])).toEqual({
        level: "info",
        message: "from a child logger",
        conn: 7,
        dn: "root",
        timestamp: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      });
      expect(sup?.logs("root")[1].meta).toEqual({ conn: 7 });
    } finally {
      process.stdout.isTTY = isTTY;
    }
  });

  it("still writes a line whose fields JSON.stringify refuses (a cycle, a BigInt)", async () => {
    const isTTY = process.stdout.isTTY;
    process.stdout.isTTY = false;
    try {
      const cyclic: Record<string, unknown> = { name: "loop" };
      cyclic.self = cyclic;
      const written = await captureStdout(async () => {
        sup = supervise(async (ctx) => {
          ctx.logger.info("odd fields", { cyclic, big: 2n ** 70n });
          await serve(ctx);
        });
        await eventually(() => sup?.logs("root").length === 1, "one line");
      });
      expect(written).toHaveLength(1);
      const line: Record<string, unknown> = JSON.parse(written[0]);
      expect(line.message).toBe("odd fields");
      expect(line.big).toBe("1180591620717411303424");
      expect(line.cyclic).toEqual({ name: "loop", self: "[Circular]" });
    } finally {
      process.stdout.isTTY = isTTY;
    }
  });
});
