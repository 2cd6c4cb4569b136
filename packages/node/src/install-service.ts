/**
 * `metropolis-node install-service`: writes the systemd unit that runs this
 * node (service-unit.ts) from the same flags the node takes, and creates
 * its root; `--print` shows the unit and writes nothing.
 *
 *   metropolis-node install-service --root DIR --address IP [--parameters FILE]
 *                                   [--config FILE] [--name NAME] [--unit-dir DIR] [--print]
 *
 * Everything is checked before anything is written: the node's own flags
 * as the node checks them (`loadNodeConfig`: the address, the configuration
 * file), the parameters file readable, every path fit for a unit and
 * outside /tmp and /var/tmp (private to the service), the executable
 * included. A bad flag
 * is an {@link InstallServiceError} (exit 2); a failure to write (not root,
 * no such unit directory) exits 1.
 */
import { constants } from "node:fs";
import { access, mkdir, realpath, stat, writeFile } from "node:fs/promises";
import { isAbsolute, join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { NodeError } from "./errors";
import { loadNodeConfig, NodeConfigError } from "./node-config";
import { installServiceUsage } from "./node-usage";
import { isUnitSafe, renderServiceUnit, type ServiceUnitOptions } from "./service-unit";

/** A flag of `install-service` is wrong; the message names it. Exit status 2. */
export class InstallServiceError extends NodeError {
  constructor(message: string) {
    super(message);
  }
}

/** Where units are installed unless `--unit-dir` says otherwise. */
export const defaultUnitDir = "/etc/systemd/system";

/** The unit's name unless `--name` says otherwise. */
export const defaultUnitName = "metropolis-node";

/** `install-service`'s flags, checked. */
export interface InstallServiceRequest {
  /** The unit to render. */
  readonly unit: ServiceUnitOptions;
  /** Where the unit file goes. */
  readonly unitDir: string;
  /** Print the unit instead of installing it. */
  readonly print: boolean;
}

/** Where the output goes; the process's streams by default. */
export interface InstallServiceIo {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
}

const unitNamePattern = /^[A-Za-z0-9_.@-]+$/;

/**
 * Directories the service sees private and empty (`PrivateTmp=yes`): a root
 * there would be a fresh, empty one at every start, and files there are not
 * the ones given.
 */
const privateDirs = ["/tmp", "/var/tmp"];

/** Refuses a path the service would not see (see {@link privateDirs}). */
function visibleToService(flag: string, path: string): string {
  const under = privateDirs.find((dir) => path === dir || path.startsWith(`${dir}/`));
  if (under !== undefined) {
    throw new InstallServiceError(
      `${flag}: ${path} is under ${under}, which the service sees private and empty ` +
        "(PrivateTmp=yes): choose another place",
    );
  }
  return path;
}

/** Refuses a value that cannot be written into the unit as it is. */
function unitSafe(flag: string, value: string): string {
  if (!isUnitSafe(value)) {
    throw new InstallServiceError(
      `${flag}: ${JSON.stringify(value)} cannot go into a systemd unit as it is: ` +
        "use only letters, digits and / . _ + @ -",
    );
  }
  return value;
}

/**
 * Checks `install-service`'s command line (without the word itself) and
 * the files it names. `command` is the node's own command: the executable
 * and the script that runs `metropolis-node` (both absolute).
 *
 * @throws InstallServiceError for any bad flag, value or file.
 */
export async function parseInstallService(
  argv: readonly string[],
  command: readonly string[],
): Promise<InstallServiceRequest> {
  let values: {
    root?: string;
    address?: string;
    parameters?: string;
    config?: string;
    name?: string;
    "unit-dir"?: string;
    print?: boolean;
  };
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: {
        root: { type: "string" },
        address: { type: "string" },
        parameters: { type: "string" },
        config: { type: "string" },
        name: { type: "string" },
        "unit-dir": { type: "string" },
        print: { type: "boolean" },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (e) {
    throw new InstallServiceError(
      `${e instanceof Error ? e.message : String(e)}\n${installServiceUsage}`,
    );
  }
  if (!values.root) throw new InstallServiceError(`--root is required\n${installServiceUsage}`);
  if (!values.address) {
    throw new InstallServiceError(`--address is required\n${installServiceUsage}`);
  }
  // The node's own checks of its flags and configuration file, as at its start.
  const nodeArgs = ["--root", values.root, "--address", values.address];
  if (values.config !== undefined) nodeArgs.push("--config", values.config);
  try {
    await loadNodeConfig(nodeArgs);
  } catch (e) {
    if (e instanceof NodeConfigError) throw new InstallServiceError(e.message);
    throw e;
  }
  const root = visibleToService("--root", unitSafe("--root", resolve(values.root)));
  if (root === "/") throw new InstallServiceError("--root: the node's root cannot be /");
  const parametersPath =
    values.parameters === undefined
      ? undefined
      : await readableFile("--parameters", resolve(values.parameters));
  const configPath =
    values.config === undefined
      ? undefined
      : await readableFile("--config", resolve(values.config));
  const name = values.name ?? defaultUnitName;
  if (!unitNamePattern.test(name) || name.endsWith(".service")) {
    throw new InstallServiceError(
      `--name: ${JSON.stringify(name)} is not a unit name: letters, digits and _ . @ -, ` +
        "without .service",
    );
  }
  const unitDir = values["unit-dir"] ?? defaultUnitDir;
  if (!isAbsolute(unitDir)) {
    throw new InstallServiceError(`--unit-dir: ${JSON.stringify(unitDir)} is not an absolute path`);
  }
  return {
    unit: {
      command: command.map((part) =>
        visibleToService("the node's executable", unitSafe("the node's executable", part)),
      ),
      root,
      address: unitSafe("--address", values.address),
      parametersPath,
      configPath,
      name,
    },
    unitDir,
    print: values.print ?? false,
  };
}

/** `path` if it is a readable regular file and fit for the unit. */
async function readableFile(flag: string, path: string): Promise<string> {
  visibleToService(flag, unitSafe(flag, path));
  try {
    if (!(await stat(path)).isFile()) throw new Error("not a regular file");
    await access(path, constants.R_OK);
  } catch (e) {
    throw new InstallServiceError(
      `${flag}: cannot read ${path}: ${e instanceof Error ? e.message : String(e)}`,
    );
  }
  return path;
}

/**
 * The command that runs this very `metropolis-node`: the Node.js executable
 * and the script it was started with (the package's bin, or tsc's
 * dist/main.js), symlinks resolved.
 */
export async function ownCommand(): Promise<string[]> {
  const script = process.argv[1];
  if (script === undefined) {
    throw new InstallServiceError("cannot tell which script runs metropolis-node");
  }
  return [process.execPath, await realpath(script)];
}

/**
 * Runs `install-service` with `argv` (after the word): prints the unit
 * (`--print`), or creates the node's root (mode 0700) and its `ephemeral/`
 * mount point and writes `<unit-dir>/<name>.service`, then says what to run
 * next. Resolves with the exit status: 0, 2 for a bad flag, 1 when writing
 * failed.
 */
export async function installService(
  argv: readonly string[],
  io: InstallServiceIo = {
    stdout: (text) => process.stdout.write(text),
    stderr: (text) => process.stderr.write(text),
  },
): Promise<number> {
  let request: InstallServiceRequest;
  try {
    request = await parseInstallService(argv, await ownCommand());
  } catch (e) {
    if (e instanceof InstallServiceError) {
      io.stderr(`metropolis-node install-service: ${e.message}\n`);
      return 2;
    }
    throw e;
  }
  const text = renderServiceUnit(request.unit);
  if (request.print) {
    io.stdout(text);
    return 0;
  }
  const unitPath = join(request.unitDir, `${request.unit.name}.service`);
  try {
    // Checked first, so that a wrong --unit-dir leaves nothing behind.
    if (!(await stat(request.unitDir)).isDirectory()) throw new Error("not a directory");
    await mkdir(request.unit.root, { recursive: true, mode: 0o700 });
    // systemd mounts the tmpfs there (TemporaryFileSystem=).
    await mkdir(join(request.unit.root, "ephemeral"), { recursive: true, mode: 0o700 });
    await writeFile(unitPath, text, { mode: 0o644 });
  } catch (e) {
    io.stderr(
      `metropolis-node install-service: cannot install ${unitPath}: ` +
        `${e instanceof Error ? e.message : String(e)}\n`,
    );
    return 1;
  }
  io.stdout(
    `wrote ${unitPath} (node root ${request.unit.root})\n` +
      "start the node now and at every boot:\n" +
      "  systemctl daemon-reload\n" +
      `  systemctl enable --now ${request.unit.name}\n`,
  );
  return 0;
}
