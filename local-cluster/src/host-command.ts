/**
 * The host tools the multi-host testbed drives (`ip`, `iptables`,
 * `iptables-restore`, `conntrack`, `nsenter`): where each one is, and running
 * one to completion with a typed error that carries what it printed.
 *
 * It exists so that testbed.ts and network.ts say what they ask of the
 * kernel and nothing about child processes. Guarantees: a tool is looked up
 * on PATH and in the sbin directories (a non-login root shell may lack
 * them), a command that exits non-zero, is killed, or runs past its
 * deadline rejects with a {@link HostCommandError} naming the command line
 * and its stderr, and no command is run through a shell.
 */
import { spawn } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { delimiter, join } from "node:path";
import { LocalClusterError } from "./errors";

/** A host command failed: it exited non-zero, was killed, could not be started, or timed out. */
export class HostCommandError extends LocalClusterError {
  constructor(
    /** The command line, as run. */
    readonly commandLine: string,
    /** Why: its exit and what it wrote to stderr. */
    readonly detail: string,
    options?: ErrorOptions,
  ) {
    super(`${commandLine}: ${detail}`, options);
  }
}

/** A tool the testbed needs. */
export type TestbedTool = "ip" | "iptables" | "iptables-restore" | "conntrack" | "nsenter";

/** The tools the testbed needs, each with the Debian package that has it. */
export const testbedTools: Readonly<Record<TestbedTool, string>> = {
  ip: "iproute2",
  iptables: "iptables",
  "iptables-restore": "iptables",
  conntrack: "conntrack",
  nsenter: "util-linux",
};

const sbinDirs = ["/usr/local/sbin", "/usr/sbin", "/sbin"];

/** The path of executable `name` on PATH or in the sbin directories, or undefined. */
export function findTool(name: string): string | undefined {
  const path = process.env.PATH ?? "";
  const dirs = [...path.split(delimiter).filter((d) => d !== ""), ...sbinDirs];
  for (const dir of dirs) {
    const candidate = join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

const resolved = new Map<string, string>();

/**
 * The path of tool `name` to spawn: found once and remembered, or the bare
 * name (spawning it then fails with a HostCommandError saying ENOENT).
 */
export function tool(name: TestbedTool): string {
  const known = resolved.get(name);
  if (known !== undefined) return known;
  const found = findTool(name);
  if (found === undefined) return name;
  resolved.set(name, found);
  return found;
}

/** What a command printed. */
export interface CommandOutput {
  stdout: string;
  stderr: string;
}

/** Default deadline of one host command. */
export const hostCommandTimeoutMs = 30_000;

/**
 * Runs `command` with `args` (no shell), writing `input` to its stdin, and
 * resolves with its output once it exited 0.
 *
 * @throws HostCommandError when it could not start, exited non-zero, was
 *   killed, or ran longer than `timeoutMs` (it is then killed).
 */
export function runCommand(
  command: string,
  args: readonly string[],
  opts: { input?: string; timeoutMs?: number } = {},
): Promise<CommandOutput> {
  const commandLine = [command, ...args].join(" ");
  return new Promise<CommandOutput>((resolve, reject) => {
    const child = spawn(command, args, {
      stdio: ["pipe", "pipe", "pipe"],
      timeout: opts.timeoutMs ?? hostCommandTimeoutMs,
      killSignal: "SIGKILL",
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (s: string) => (stdout += s));
    child.stderr.setEncoding("utf8").on("data", (s: string) => (stderr += s));
    child.once("error", (e) => reject(new HostCommandError(commandLine, e.message, { cause: e })));
    child.once("close", (code, signal) => {
      if (code === 0) return resolve({ stdout, stderr });
      const exit = signal ? `killed by ${signal}` : `exit ${code}`;
      reject(new HostCommandError(commandLine, `${exit}: ${stderr.trim() || "(no output)"}`));
    });
    // A command that does not read its stdin closes it early: that is no error of ours.
    child.stdin.on("error", () => undefined);
    child.stdin.end(opts.input ?? "");
  });
}
