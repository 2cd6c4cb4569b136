import { PassThrough } from "node:stream";
import { supervise, type Logger as TreeLogger, type Supervisor } from "@metropolis/supervisor";
import type { Logger } from "winston";
import { nodeLogger, type NodeLogLine } from "../src/node-logger";

/** A stream that records every line written to it. */
function sink(): { stream: PassThrough; lines: string[]; waitFor(n: number): Promise<string[]> } {
  const stream = new PassThrough();
  let buffered = "";
  const lines: string[] = [];
  stream.on("data", (chunk: Buffer) => {
    buffered += chunk.toString("utf8");
    const parts = buffered.split("\n");
    buffered = parts.pop()!;
    lines.push(...parts);
  });
  return {
    stream,
    lines,
    async waitFor(n) {
      const deadline = Date.now() + 5000;
      while (lines.length < n) {
        if (Date.now() > deadline)
          throw new Error(`only ${lines.length} of ${n} lines: ${lines.join("\n")}`);
        await new Promise((r) => setImmediate(r));
      }
      return lines;
    },
  };
}

const iso = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

let sup: Supervisor | undefined;
let logger: Logger | undefined;
afterEach(async () => {
  await sup?.stop();
  logger?.close();
  sup = logger = undefined;
});

/** Runs a tree whose child logs `lines`, then waits until the sink has seen `n` lines. */
async function logThroughTree(
  l: Logger,
  log: (child: TreeLogger, sub: TreeLogger) => void,
): Promise<void> {
  let healthy!: () => void;
  const isHealthy = new Promise<void>((r) => (healthy = r));
  sup = supervise(
    async (ctx) => {
      ctx.run("role", async (c) => {
        log(c.logger, c.subLogger("launcher"));
        c.healthy();
        await c.untilAborted();
      });
      ctx.healthy();
      healthy();
      await ctx.untilAborted();
    },
    { logger: l },
  );
  await isHealthy;
}

describe("nodeLogger", () => {
  it("writes one JSON object per line, with time, level, the runnable's DN, message and meta", async () => {
    const out = sink();
    logger = nodeLogger({ tty: false, stream: out.stream, level: "info" });
    await logThroughTree(logger, (role, launcher) => {
      role.info("role started", { roles: ["consensus"], attempt: 2 });
      role.debug("not at info");
      launcher.warn("launcher line");
    });
    const lines = (await out.waitFor(2)).map((l) => JSON.parse(l) as NodeLogLine);
    expect(lines).toHaveLength(2);
    expect(lines[0]).toEqual({
      time: expect.stringMatching(iso),
      level: "info",
      dn: "root.role",
      message: "role started",
      meta: { roles: ["consensus"], attempt: 2 },
    });
    expect(Object.keys(lines[0])).toEqual(["time", "level", "dn", "message", "meta"]);
    expect(lines[1]).toMatchObject({
      level: "warn",
      dn: "root.role.launcher",
      message: "launcher line",
      meta: {},
    });
  });

  it("writes human-readable lines on a terminal: time level dn: message", async () => {
    const out = sink();
    logger = nodeLogger({ tty: true, stream: out.stream, level: "info" });
    await logThroughTree(logger, (role) => {
      role.info("role started");
      role.warn("slow peer", { peer: "127.0.0.2" });
    });
    const lines = await out.waitFor(2);
    expect(lines).toHaveLength(2);
    const [time, ...rest] = lines[0].split(" ");
    expect(time).toMatch(iso);
    expect(rest.join(" ")).toBe("info root.role: role started");
    expect(lines[1].slice(time.length + 1)).toBe('warn root.role: slow peer {"peer":"127.0.0.2"}');
  });

  it("prints a failure's stack below its line on a terminal, and keeps it in meta in JSON", async () => {
    const tty = sink();
    logger = nodeLogger({ tty: true, stream: tty.stream });
    logger.error(new Error("disk on fire"));
    const lines = await tty.waitFor(2);
    expect(lines[0]).toMatch(/ error -: disk on fire$/);
    expect(lines[1]).toBe("Error: disk on fire");
    expect(lines[2]).toMatch(/^ +at /);
    logger.close();

    const json = sink();
    logger = nodeLogger({ tty: false, stream: json.stream });
    logger.error(new Error("disk on fire"));
    const [line] = await json.waitFor(1);
    const parsed = JSON.parse(line) as NodeLogLine;
    expect(parsed).toMatchObject({ level: "error", dn: "", message: "disk on fire" });
    expect(parsed.meta.stack).toMatch(/^Error: disk on fire\n +at /);
  });

  it("picks JSON when stdout is not a terminal, and its level from METROPOLIS_LOG_LEVEL", () => {
    const saved = { isTTY: process.stdout.isTTY, level: process.env.METROPOLIS_LOG_LEVEL };
    try {
      process.env.METROPOLIS_LOG_LEVEL = "debug";
      process.stdout.isTTY = false;
      const out = sink();
      logger = nodeLogger({ stream: out.stream });
      expect(logger.level).toBe("debug");
      const info = { level: "info", message: "m", dn: "root" };
      const formatted = logger.format.transform({ ...info }) as Record<string | symbol, unknown>;
      expect(JSON.parse(String(formatted[Symbol.for("message")]))).toMatchObject(info);
      logger.close();
      process.stdout.isTTY = true;
      logger = nodeLogger({ stream: out.stream });
      const human = logger.format.transform({ ...info }) as Record<string | symbol, unknown>;
      expect(String(human[Symbol.for("message")])).toMatch(/ info root: m$/);
    } finally {
      process.stdout.isTTY = saved.isTTY;
      if (saved.level === undefined) delete process.env.METROPOLIS_LOG_LEVEL;
      else process.env.METROPOLIS_LOG_LEVEL = saved.level;
    }
  });
});
