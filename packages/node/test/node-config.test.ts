/**
 * metropolis-node's command line and configuration file: defaults, and a
 * clear error naming every bad flag or field.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadNodeConfig, NodeConfigError } from "../src/node-config";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "metropolis-node-config-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function config(content: string): Promise<string> {
  const path = join(dir, `config-${Math.random().toString(36).slice(2)}.json`);
  await writeFile(path, content);
  return path;
}

describe("loadNodeConfig", () => {
  it("takes the defaults without a config file", async () => {
    const c = await loadNodeConfig(["--root", "r", "--address", "127.0.0.2"]);
    expect(c.ports).toEqual({ consensus: 7834, curator: 7835, debug: 7837, metrics: 7838 });
    expect(c.root).toBe(join(process.cwd(), "r"));
    expect(c.workloads).toEqual([]);
    expect(c.loopbackTimings).toBe(false);
    expect(c.leaderTtlSeconds).toBe(10);
    expect(c.ephemeralTmpfs).toBe(true);
    expect(c.parametersPath).toBeUndefined();
  });

  it("reads ports, workloads and timings from the config file", async () => {
    const path = await config(
      JSON.stringify({
        ports: { curator: 9000, plainMetrics: 9100 },
        workloads: [{ name: "web", command: "sleep", args: ["1"] }],
        loopbackTimings: true,
        leaderTtlSeconds: 3,
        ephemeralTmpfs: false,
      }),
    );
    const c = await loadNodeConfig(["--root", "r", "--address", "127.0.0.2", "--config", path]);
    expect(c.ports.curator).toBe(9000);
    expect(c.ports.consensus).toBe(7834);
    // The plain metrics endpoint is off unless asked for (see the defaults above).
    expect(c.ports.plainMetrics).toBe(9100);
    expect(c.workloads).toEqual([{ name: "web", command: "sleep", args: ["1"] }]);
    expect(c.loopbackTimings).toBe(true);
    expect(c.leaderTtlSeconds).toBe(3);
    expect(c.ephemeralTmpfs).toBe(false);
  });

  it("takes --recover-from with --owner-key, and refuses either alone or with --parameters", async () => {
    const c = await loadNodeConfig([
      "--root",
      "r",
      "--address",
      "127.0.0.2",
      "--recover-from",
      "b.backup",
      "--owner-key",
      "k.pem",
    ]);
    expect(c.recoverFrom).toBe(join(process.cwd(), "b.backup"));
    expect(c.ownerKeyPath).toBe(join(process.cwd(), "k.pem"));
    const base = ["--root", "r", "--address", "127.0.0.2"];
    await expect(loadNodeConfig([...base, "--recover-from", "b"])).rejects.toThrow(
      /--recover-from needs --owner-key/,
    );
    await expect(loadNodeConfig([...base, "--owner-key", "k"])).rejects.toThrow(
      /--owner-key is only for --recover-from/,
    );
    await expect(
      loadNodeConfig([...base, "--recover-from", "b", "--owner-key", "k", "--parameters", "p"]),
    ).rejects.toThrow(/--recover-from and --parameters exclude each other/);
  });

  it("refuses bad flags and fields, naming them", async () => {
    const cases: [string[] | string, RegExp][] = [
      [["--address", "127.0.0.2"], /--root is required/],
      [["--root", "r"], /--address is required/],
      [["--root", "r", "--address", "localhost"], /--address must be an IPv4 address/],
      [["--root", "r", "--address", "127.0.0.2", "--bogus"], /Unknown option '--bogus'/],
      ["{", /is not valid JSON/],
      ["[]", /must be a JSON object/],
      ['{"port": 1}', /unknown field "port"/],
      ['{"ports": {"curator": 0}}', /ports.curator must be a port number/],
      ['{"ports": {"web": 80}}', /unknown port "web"/],
      ['{"ports": {"plainMetrics": "80"}}', /ports.plainMetrics must be a port number/],
      ['{"workloads": [{"name": "Bad Name", "command": "x"}]}', /workloads: .*Bad Name/],
      ['{"leaderTtlSeconds": -1}', /leaderTtlSeconds must be a positive number/],
      ['{"loopbackTimings": "yes"}', /loopbackTimings must be true or false/],
      ['{"ephemeralTmpfs": 0}', /ephemeralTmpfs must be true or false/],
    ];
    for (const [input, message] of cases) {
      const argv =
        typeof input === "string"
          ? ["--root", "r", "--address", "127.0.0.2", "--config", await config(input)]
          : input;
      const error = await loadNodeConfig(argv).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(NodeConfigError);
      expect((error as Error).message).toMatch(message);
    }
    const missing = await loadNodeConfig([
      "--root",
      "r",
      "--address",
      "127.0.0.2",
      "--config",
      join(dir, "missing.json"),
    ]).catch((e: unknown) => e);
    expect((missing as Error).message).toMatch(/cannot read config .*missing.json/);
  });
});
