/**
 * `metropolis-node install-service`, run as the executable (tsc's output,
 * dist/main.js, built by `tsc -b` before jest): the unit it renders passes
 * `systemd-analyze verify` without a warning and says what a node needs
 * (restarts on failure and on the reboot status, none after a power-off or
 * a stop, ephemeral/ a tmpfs, writes only under the root, hardening, the
 * node's flags in ExecStart); installing writes exactly the printed unit
 * and creates the root; a bad flag exits 2 naming it and writes nothing.
 *
 * The roots are under /dev/shm: install-service refuses /tmp, which the
 * service sees private.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import {
  cp,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  realpath,
  rm,
  stat,
  writeFile,
} from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { InstallServiceError, parseInstallService } from "../src/install-service";
import { rebootExitStatus } from "../src/node-management";
import { installServiceHelp } from "../src/node-usage";

/** The node package: its dist/main.js is the executable, unless the checkout lies under /tmp. */
const nodePackage = resolve(__dirname, "..");
/**
 * The executable the tests run: tsc's dist/main.js; in a checkout under /tmp
 * or /var/tmp (a CI clone), which install-service refuses (the service's
 * /tmp is private), the package's bin, bundle and package.json copied to
 * /dev/shm, as an operator installs them (set in beforeAll).
 */
let main = join(nodePackage, "dist", "main.js");

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `command args…` to completion. */
function run(command: string, args: readonly string[]): Promise<Run> {
  return new Promise((done) =>
    execFile(command, [...args], { timeout: 20_000 }, (err, stdout, stderr) =>
      done({
        code: err === null ? 0 : typeof err.code === "number" ? err.code : -1,
        stdout,
        stderr,
      }),
    ),
  );
}

/** `metropolis-node install-service args…`, as the executable. */
const installService = (args: readonly string[]) =>
  run(process.execPath, [main, "install-service", ...args]);

/** A unit file's directives: section → key → values in order. */
function parseUnit(text: string): Map<string, Map<string, string[]>> {
  const sections = new Map<string, Map<string, string[]>>();
  let current: Map<string, string[]> | undefined;
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const header = /^\[(\w+)\]$/.exec(line);
    if (header) {
      current = new Map();
      sections.set(header[1], current);
      continue;
    }
    const eq = line.indexOf("=");
    if (current === undefined || eq < 0) throw new Error(`not a directive: ${line}`);
    const key = line.slice(0, eq);
    current.set(key, [...(current.get(key) ?? []), line.slice(eq + 1)]);
  }
  return sections;
}

/** The one value of `key` in `section`; fails when there is none or several. */
function directive(unit: Map<string, Map<string, string[]>>, section: string, key: string): string {
  const values = unit.get(section)?.get(key) ?? [];
  if (values.length !== 1) throw new Error(`[${section}] ${key}: ${values.length} values`);
  return values[0];
}

let shm: string;
let files: string;
beforeAll(async () => {
  expect(existsSync(main)).toBe(true);
  shm = await mkdtemp("/dev/shm/metropolis-install-service-");
  files = await mkdtemp(join(tmpdir(), "install-service-"));
  if (/^\/(var\/)?tmp\//.test(await realpath(main))) {
    const installed = join(shm, "node-package");
    for (const part of ["bin", "bundle", "package.json"]) {
      await cp(join(nodePackage, part), join(installed, part), { recursive: true });
    }
    main = join(installed, "bin", "metropolis-node.js");
  }
});
afterAll(async () => {
  await rm(shm, { recursive: true, force: true });
  await rm(files, { recursive: true, force: true });
});

/** `systemd-analyze` on PATH (or in the usual directories), if it is installed. */
function findSystemdAnalyze(): string | undefined {
  const dirs = [...(process.env.PATH ?? "").split(":"), "/usr/bin", "/bin"].filter((d) => d !== "");
  return dirs.map((dir) => join(dir, "systemd-analyze")).find((path) => existsSync(path));
}

const systemdAnalyze = findSystemdAnalyze();
const withSystemdAnalyze = systemdAnalyze === undefined ? it.skip : it;

withSystemdAnalyze(
  `renders a unit that systemd-analyze verify passes without a warning${systemdAnalyze === undefined ? " (SKIPPED: no systemd-analyze here)" : ""}`,
  async () => {
    const root = join(shm, "root");
    const parameters = join(shm, "bootstrap.pb");
    const config = join(shm, "node.json");
    await writeFile(parameters, "");
    await writeFile(config, JSON.stringify({ heartbeatTimeoutMs: 20000 }));
    const printed = await installService([
      "--root",
      root,
      "--address",
      "10.0.0.1",
      "--parameters",
      parameters,
      "--config",
      config,
      "--print",
    ]);
    expect(printed).toMatchObject({ code: 0, stderr: "" });
    // --print writes nothing.
    expect(existsSync(root)).toBe(false);
    const unitFile = join(files, "metropolis-node.service");
    await writeFile(unitFile, printed.stdout);
    // It checks that ExecStart's executable exists: here, this very Node.js.
    const verified = await run(systemdAnalyze ?? "systemd-analyze", ["verify", unitFile]);
    expect(verified).toEqual({ code: 0, stdout: "", stderr: "" });

    const unit = parseUnit(printed.stdout);
    expect([...unit.keys()]).toEqual(["Unit", "Service", "Install"]);
    // The node's own command line, with the flags given.
    expect(directive(unit, "Service", "ExecStart").split(" ")).toEqual([
      process.execPath,
      main,
      "--root",
      root,
      "--address",
      "10.0.0.1",
      "--parameters",
      parameters,
      "--config",
      config,
    ]);
    // Restarted after a failure and after the owner's reboot (exit 75); exit 0
    // (a power-off, a stop) counts as success, which on-failure never restarts.
    expect(rebootExitStatus).toBe(75);
    expect(directive(unit, "Service", "Restart")).toBe("on-failure");
    expect(directive(unit, "Service", "RestartForceExitStatus")).toBe(String(rebootExitStatus));
    expect(directive(unit, "Service", "RestartPreventExitStatus")).toBe("2");
    expect(unit.get("Service")?.has("SuccessExitStatus")).toBe(false);
    // The graceful stop is the node's: SIGTERM to it alone.
    expect(directive(unit, "Service", "KillMode")).toBe("mixed");
    expect(directive(unit, "Service", "TimeoutStopSec")).toBe("30s");
    expect(directive(unit, "Service", "LimitNOFILE")).toBe("1048576");
    // ephemeral/ in memory, private to the service.
    expect(directive(unit, "Service", "TemporaryFileSystem")).toBe(
      `${root}/ephemeral:mode=0700,nosuid,nodev`,
    );
    // Writes only under its root (and its code cache).
    expect(directive(unit, "Service", "ProtectSystem")).toBe("strict");
    expect(directive(unit, "Service", "ReadWritePaths")).toBe(root);
    expect(directive(unit, "Service", "CacheDirectory")).toBe("metropolis-node");
    expect(directive(unit, "Service", "Environment")).toBe(
      "XDG_CACHE_HOME=/var/cache/metropolis-node",
    );
    for (const key of [
      "NoNewPrivileges",
      "PrivateTmp",
      "ProtectKernelTunables",
      "ProtectKernelModules",
      "ProtectControlGroups",
      "ProtectHostname",
    ]) {
      expect([key, directive(unit, "Service", key)]).toEqual([key, "yes"]);
    }
    expect(directive(unit, "Service", "ProtectHome")).toBe("read-only");
    expect(directive(unit, "Service", "SystemCallArchitectures")).toBe("native");
    expect(directive(unit, "Service", "UMask")).toBe("0077");
    // V8 needs writable executable memory.
    expect(unit.get("Service")?.has("MemoryDenyWriteExecute")).toBe(false);
    expect(directive(unit, "Unit", "After")).toBe("network-online.target");
    expect(directive(unit, "Install", "WantedBy")).toBe("multi-user.target");
  },
);

it("installs the printed unit, creates the root, and says what to run next", async () => {
  const root = join(shm, "installed", "var", "lib", "metropolis");
  const unitDir = join(shm, "units");
  await mkdir(unitDir);
  const args = ["--root", root, "--address", "10.0.0.2", "--name", "metropolis-node2"];
  const printed = await installService([...args, "--print"]);
  expect(printed.code).toBe(0);
  const installed = await installService([...args, "--unit-dir", unitDir]);
  expect(installed).toEqual({
    code: 0,
    stdout:
      `wrote ${unitDir}/metropolis-node2.service (node root ${root})\n` +
      "start the node now and at every boot:\n" +
      "  systemctl daemon-reload\n" +
      "  systemctl enable --now metropolis-node2\n",
    stderr: "",
  });
  const unitPath = join(unitDir, "metropolis-node2.service");
  expect(await readFile(unitPath, "utf8")).toBe(printed.stdout);
  expect((await stat(unitPath)).mode & 0o777).toBe(0o644);
  expect((await stat(root)).mode & 0o777).toBe(0o700);
  expect((await stat(join(root, "ephemeral"))).isDirectory()).toBe(true);
  expect(directive(parseUnit(printed.stdout), "Service", "CacheDirectory")).toBe(
    "metropolis-node2",
  );
});

const badFlags: [string[], string][] = [
  [[], "--root is required"],
  [["--root", "/var/lib/m"], "--address is required"],
  [["--root", "/var/lib/m", "--address", "10.0.0.300"], "--address must be an IPv4 address"],
  [["--root", "/var/lib/m", "--address", "10.0.0.1", "--bogus"], "Unknown option '--bogus'"],
  [["--root", "/tmp/m", "--address", "10.0.0.1"], "--root: /tmp/m is under /tmp"],
  [["--root", "/var/lib/my node", "--address", "10.0.0.1"], '--root: "/var/lib/my node" cannot'],
  [["--root", "/var/lib/m%i", "--address", "10.0.0.1"], '--root: "/var/lib/m%i" cannot'],
  [["--root", "/", "--address", "10.0.0.1"], "--root: the node's root cannot be /"],
  [
    ["--root", "/var/lib/m", "--address", "10.0.0.1", "--parameters", "/nonexistent.pb"],
    "--parameters: cannot read /nonexistent.pb",
  ],
  [
    ["--root", "/var/lib/m", "--address", "10.0.0.1", "--config", "/nonexistent.json"],
    "cannot read config /nonexistent.json",
  ],
  [
    ["--root", "/var/lib/m", "--address", "10.0.0.1", "--name", "x.service"],
    '--name: "x.service" is not a unit name',
  ],
  [
    ["--root", "/var/lib/m", "--address", "10.0.0.1", "--unit-dir", "units"],
    '--unit-dir: "units" is not an absolute path',
  ],
];

it.each(badFlags.map(([args, message]) => ({ args, message, line: args.join(" ") })))(
  "refuses `$line` with exit 2: $message",
  async ({ args, message }) => {
    const result = await installService(args);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe("");
    expect(result.stderr).toContain(`metropolis-node install-service: ${message}`);
    expect(existsSync("/var/lib/m")).toBe(false);
  },
);

it("refuses a configuration file the node would refuse, naming its field", async () => {
  const config = join(shm, "bad.json");
  await writeFile(config, JSON.stringify({ port: 1 }));
  const result = await installService([
    "--root",
    join(shm, "r"),
    "--address",
    "10.0.0.1",
    "--config",
    config,
  ]);
  expect(result.code).toBe(2);
  expect(result.stderr).toContain(`config ${config}: unknown field "port"`);
  expect(existsSync(join(shm, "r"))).toBe(false);
});

it("fails with exit 1 and writes nothing when the unit directory is not there", async () => {
  const root = join(shm, "never");
  const result = await installService([
    "--root",
    root,
    "--address",
    "10.0.0.1",
    "--unit-dir",
    join(shm, "no-such-dir"),
  ]);
  expect(result.code).toBe(1);
  expect(result.stderr).toContain(
    `cannot install ${join(shm, "no-such-dir")}/metropolis-node.service`,
  );
  expect(existsSync(root)).toBe(false);
  expect(await readdir(shm)).not.toContain("no-such-dir");
});

it("answers install-service --help with its own text", async () => {
  const result = await installService(["--help"]);
  expect(result).toEqual({ code: 0, stdout: installServiceHelp, stderr: "" });
  expect(installServiceHelp).toContain("--print");
});

it("refuses to run a node executable under /tmp or /var/tmp, which the service sees private", async () => {
  const args = ["--root", "/var/lib/m", "--address", "10.0.0.1"];
  await expect(
    parseInstallService(args, ["/usr/bin/node", "/tmp/clone/packages/node/bin/metropolis-node.js"]),
  ).rejects.toThrow(
    new InstallServiceError(
      "the node's executable: /tmp/clone/packages/node/bin/metropolis-node.js is under /tmp, " +
        "which the service sees private and empty (PrivateTmp=yes): choose another place",
    ),
  );
  await expect(parseInstallService(args, ["/var/tmp/node", "/opt/m.js"])).rejects.toThrow(
    InstallServiceError,
  );
  const request = await parseInstallService(args, [process.execPath, main]);
  expect(request.unit.command).toEqual([process.execPath, main]);
});
