/**
 * Flag and argument validation, and the pure parts (endpoints, config dir
 * files, the supervision tree drawing). Everything here fails before
 * metroctl dials anything, so no cluster runs: a bad flag must be one clear
 * line and exit code 1, whatever the state of the config dir.
 */
import { readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { api } from "@metropolis/proto";
import { ConfigDir, runMetroctl } from "../src";
import { buildSupervisionTree, renderSupervisionTree } from "../src/supervision-tree";
import { defaultConfigDir } from "../src/config-dir";
import { parseEndpoint } from "../src/endpoints";
import { Capture, metroctl, removeTempDirs, tempDir } from "./cluster-fixture";

afterAll(removeTempDirs);

const nodeId = "metropolis-" + "0123456789abcdef".repeat(2);

describe("bad flags fail with one clear line and exit code 1", () => {
  const cases: [string[], string][] = [
    [
      ["bootstrap-params", "-o", "x.pb", "--label", "novalue"],
      'metroctl: bootstrap-params: --label: "novalue" is not key=value',
    ],
    [
      ["bootstrap-params", "-o", "x.pb", "--label", "a=b", "--label", "a=c"],
      'metroctl: bootstrap-params: --label: key "a" given twice',
    ],
    [
      ["bootstrap-params"],
      "metroctl: bootstrap-params: required option '-o, --output <file>' not specified",
    ],
    [
      ["set-role", nodeId, "--worker", "perhaps"],
      'metroctl: set-role: --worker: "perhaps" is not on or off',
    ],
    [
      ["set-role", nodeId],
      "metroctl: set-role: give at least one of --consensus, --controller, --worker (on or off)",
    ],
    [
      ["approve", "node-1"],
      'metroctl: approve: "node-1" is not a node ID (metropolis- followed by 32 hex digits)',
    ],
    // `approve` without an ID lists pending nodes (listing.test.ts); a node command still needs one.
    [["node", "describe"], "metroctl: node describe: missing required argument 'id'"],
    [["completion"], "metroctl: completion: missing required argument 'shell'"],
    [
      ["nodes", "--filter", "node.state =="],
      "metroctl: nodes: --filter: Unexpected token: EOF at position 14 (end of expression)",
    ],
    [["label", nodeId, "k"], 'metroctl: label: "k" is neither key=value (set) nor key- (remove)'],
    [["label", nodeId, "k=v", "k-"], 'metroctl: label: "k" is both set and removed'],
    [
      ["wait", nodeId, "--state", "UP", "--timeout", "soon"],
      'metroctl: wait: --timeout: "soon" is not a positive number of seconds',
    ],
    [
      ["wait", nodeId, "--state", "UP", "--timeout", "-1"],
      'metroctl: wait: --timeout: "-1" is not a positive number of seconds',
    ],
    [
      ["wait", nodeId, "--state", "RUNNING"],
      'metroctl: wait: --state: "RUNNING" is not one of NEW, STANDBY, UP, DECOMMISSIONED',
    ],
    [
      ["wait", nodeId, "--health", "OK"],
      'metroctl: wait: --health: "OK" is not one of UNKNOWN, HEALTHY, HEARTBEAT_TIMEOUT',
    ],
    [["wait", nodeId], "metroctl: wait: give --state and/or --health to wait for"],
    [
      ["logs", nodeId, "--tail", "many"],
      'metroctl: logs: --tail: "many" is not a whole number from 0 to 4294967295',
    ],
    [
      ["tree", nodeId, "--debug-port", "70000"],
      'metroctl: tree: --debug-port: "70000" is not a whole number from 0 to 65535',
    ],
    [
      ["nodes", "-o", "xml"],
      "metroctl: nodes: option '-o, --output <format>' argument 'xml' is invalid. Allowed choices are table, wide, json, yaml.",
    ],
    [["nodes", "--verbose"], "metroctl: nodes: unknown option '--verbose'"],
    [
      ["--endpoints", "10.0.0.1:http", "nodes"],
      'metroctl: nodes: endpoint "10.0.0.1:http": port must be a number from 1 to 65535',
    ],
    [
      ["--dial-timeout", "0", "nodes"],
      'metroctl: nodes: --dial-timeout: "0" is not a positive number of seconds',
    ],
    [
      ["takeownership", "--ca-sha256", "abc"],
      'metroctl: takeownership: --ca-sha256: "abc" is not 64 hex digits',
    ],
    [["frobnicate"], "metroctl: unknown command 'frobnicate'"],
  ];
  it.each(cases)("%j", async (args, message) => {
    const config = await tempDir("flags");
    const res = await metroctl(config, args);
    expect(res.code).toBe(1);
    expect(res.stdout).toBe("");
    expect(res.stderr).toBe(message + "\n");
  });

  it("prints help with exit code 0", async () => {
    const res = await metroctl(await tempDir("help"), ["wait", "--help"]);
    expect(res.code).toBe(0);
    expect(res.stdout).toContain("Usage: metroctl wait [options] <id>");
    expect(res.stderr).toBe("");
  });
});

describe("label keys that name Object.prototype members", () => {
  // `__proto__` is no valid label key: refused before anything is dialed, naming the key.
  it.each([
    ["bootstrap-params", "-o", "x.pb", "--label", "__proto__=x"],
    ["register-params", "-o", "x.pb", "--label", "rack=r1", "--label", "__proto__="],
    ["label", nodeId, "__proto__=x"],
    ["label", nodeId, "ok=1", "__proto__-"],
  ])("%j is a usage error naming __proto__", async (...args) => {
    const res = await metroctl(await tempDir("proto-label"), args);
    expect(res.code).toBe(1);
    expect(res.stdout).toBe("");
    expect(res.stderr.split("\n")).toHaveLength(2);
    expect(res.stderr).toMatch(new RegExp(`^metroctl: ${args[0]}: (--label: )?invalid label key`));
    expect(res.stderr).toContain('"__proto__"');
  });

  it("constructor and prototype are kept as the keys they are", async () => {
    const config = await tempDir("proto-label");
    const out = join(config, "bootstrap.pb");
    const res = await metroctl(config, [
      "bootstrap-params",
      "-o",
      out,
      "--label",
      "constructor=c",
      "--label",
      "prototype=p",
    ]);
    expect(res.code).toBe(0);
    const params = api.NodeParameters.decode(await readFile(out));
    expect(
      params.cluster?.$case === "clusterBootstrap" && params.cluster.clusterBootstrap.labels,
    ).toEqual(
      new Map([
        ["constructor", "c"],
        ["prototype", "p"],
      ]),
    );
  });
});

describe("config dir", () => {
  it("defaults to ~/.config/metroctl, or $XDG_CONFIG_HOME/metroctl", async () => {
    expect(defaultConfigDir({ HOME: "/home/op" })).toBe("/home/op/.config/metroctl");
    expect(defaultConfigDir({ HOME: "/home/op", XDG_CONFIG_HOME: "/cfg" })).toBe("/cfg/metroctl");
    // Without --config, metroctl works in $HOME's config dir.
    const home = await tempDir("home");
    const stderr = new Capture();
    const code = await runMetroctl(["bootstrap-params", "-o", join(home, "p.pb")], {
      stdout: new Capture(),
      stderr,
      env: { HOME: home },
    });
    expect(code).toBe(0);
    expect(stderr.text).toContain(join(home, ".config", "metroctl", "owner-key.pem"));
    expect(await new ConfigDir(join(home, ".config", "metroctl")).readOwnerKey()).toBeDefined();
  });

  it("writes atomically, leaving no temp files", async () => {
    const dir = await tempDir("atomic");
    const config = new ConfigDir(dir);
    await config.ensureOwnerKey();
    await config.writeEndpoints([{ host: "10.0.0.1", port: 7835 }]);
    await config.writeEndpoints([{ host: "10.0.0.2", port: 7835 }]);
    expect((await readdir(dir)).sort()).toEqual(["endpoints", "owner-key.pem"]);
  });

  it("creates one owner key under concurrent first use", async () => {
    const config = new ConfigDir(await tempDir("race"));
    const results = await Promise.all(Array.from({ length: 8 }, () => config.ensureOwnerKey()));
    expect(results.filter((r) => r.created)).toHaveLength(1);
    const keys = new Set(results.map((r) => r.key.publicKey.toString("hex")));
    expect(keys.size).toBe(1);
  });

  it("reports a corrupt endpoints file with the file and line", async () => {
    const dir = await tempDir("endpoints");
    const file = join(dir, "endpoints");
    await writeFile(file, "10.0.0.1:7835\n10.0.0.2:port\n");
    await expect(new ConfigDir(dir).readEndpoints()).rejects.toThrow(
      `${file}: line 2: endpoint "10.0.0.2:port": port must be a number from 1 to 65535`,
    );
  });

  it.each([
    ["garbage", "garbage\n"],
    [
      "a PEM block that is not a certificate",
      "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
    ],
    ["a private key", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"],
  ])("reports each PEM file holding %s, naming it", async (_what, content) => {
    const dir = await tempDir("pem");
    const config = new ConfigDir(dir);
    await config.ensureOwnerKey();
    await writeFile(config.path("ca.pem"), content);
    await expect(config.readCaCertificate()).rejects.toThrow(
      new RegExp(`^${config.path("ca.pem")}: not a certificate: `),
    );
    await writeFile(config.path("owner.pem"), content);
    await expect(config.readOwnerCredentials()).rejects.toThrow(
      new RegExp(`^${config.path("owner.pem")}: not a certificate: `),
    );
    await writeFile(config.path("owner-key.pem"), content.replace(/PRIVATE KEY/g, "CERTIFICATE"));
    await expect(config.readOwnerKey()).rejects.toThrow(
      new RegExp(`^${config.path("owner-key.pem")}: not an Ed25519 private key: `),
    );
  });
});

describe("endpoints", () => {
  it("get the curator's default port when given without one", () => {
    expect(parseEndpoint("10.0.0.1")).toEqual({ host: "10.0.0.1", port: 7835 });
    expect(parseEndpoint("node-1.example:9000")).toEqual({ host: "node-1.example", port: 9000 });
    expect(parseEndpoint("[fd00::1]:7000")).toEqual({ host: "fd00::1", port: 7000 });
    expect(parseEndpoint("fd00::1")).toEqual({ host: "fd00::1", port: 7835 });
    expect(() => parseEndpoint("bad host:1")).toThrow(/not an IP address or host name/);
    expect(() => parseEndpoint("10.0.0.1:0")).toThrow(/port must be a number from 1 to 65535/);
  });
});

describe("supervision tree drawing", () => {
  const at = new Date("2024-05-01T12:00:00Z");
  const nodes: api.SupervisionNode[] = [
    {
      dn: "root",
      state: api.RunnableState.HEALTHY,
      restarts: 0,
      since: at,
      lastError: "",
      givenUp: false,
      status: "",
    },
    {
      dn: "root.consensus",
      state: api.RunnableState.HEALTHY,
      restarts: 0,
      lastError: "",
      givenUp: false,
      // Its machine's state; a node of another version might send more than one line.
      status: "running.voter\n(joined)",
    },
    {
      dn: "root.consensus.etcd",
      state: api.RunnableState.DEAD,
      restarts: 3,
      lastError: "exit code 1\n  at somewhere",
      nextRestartInMs: 1500,
      givenUp: false,
      status: "",
    },
    {
      dn: "root.curator",
      state: api.RunnableState.NEW,
      restarts: 1,
      lastError: "boom",
      givenUp: true,
      status: "",
    },
  ];

  it("nests runnables under their parents, with states, restarts, statuses and last errors", () => {
    const lines = renderSupervisionTree(buildSupervisionTree(nodes)).split("\n");
    expect(lines).toEqual([
      "RUNNABLE      STATE    RESTARTS  DETAIL",
      "root          HEALTHY  0",
      "├─ consensus  HEALTHY  0         state: running.voter",
      "│  └─ etcd    DEAD     3         restart in 1.5s; last error: exit code 1",
      "└─ curator    NEW      1         gave up; last error: boom",
    ]);
  });

  it("keeps a runnable whose parent is missing, under its full DN", () => {
    const tree = buildSupervisionTree([nodes[2]]);
    expect(tree).toEqual([
      expect.objectContaining({
        dn: "root.consensus.etcd",
        name: "root.consensus.etcd",
        state: "DEAD",
      }),
    ]);
    expect(buildSupervisionTree(nodes)[0]).toMatchObject({
      name: "root",
      since: "2024-05-01T12:00:00.000Z",
      status: null,
      children: [
        {
          name: "consensus",
          status: "running.voter\n(joined)",
          children: [{ name: "etcd", restarts: 3, nextRestartInMs: 1500 }],
        },
        { name: "curator", givenUp: true, lastError: "boom" },
      ],
    });
  });
});
