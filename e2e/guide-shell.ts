/**
 * Running the README guides' blocks (guide-blocks.ts) through bash, shared by
 * `guide.test.ts` and `operating-guide.test.ts`: {@link runBash} runs a
 * script in a process group of its own with a deadline; {@link assignedNames}
 * are the shell variables a block sets, which the tests keep for the blocks
 * after it; {@link scpStandIn} is the `scp` of the operator's machine, a copy
 * into a machine's directory; {@link machinePaths} puts a machine's
 * directory in place of the guides' `/var/lib/…` and `/root/…`.
 */
import { spawn } from "node:child_process";

/** What a bash run printed, or why it failed. */
export interface BashResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `script` with `bash -s` (the script on stdin), `argv` before it (e.g.
 * `nsenter … --`), in its own process group, killed (the group, by its PID)
 * after `timeoutMs`.
 */
export function runBash(
  script: string,
  timeoutMs: number,
  prefix: readonly string[] = [],
): Promise<BashResult> {
  const [command, ...args] = [...prefix, "bash", "-s"];
  return new Promise((done, fail) => {
    const child = spawn(command, args, { stdio: ["pipe", "pipe", "pipe"], detached: true });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (s: string) => (stdout += s));
    child.stderr.setEncoding("utf8").on("data", (s: string) => (stderr += s));
    const timer = setTimeout(() => {
      if (child.pid !== undefined) {
        try {
          process.kill(-child.pid, "SIGKILL");
        } catch {
          // gone already
        }
      }
    }, timeoutMs);
    child.once("error", (e) => {
      clearTimeout(timer);
      fail(e);
    });
    child.once("close", (code, signal) => {
      clearTimeout(timer);
      done({ code, signal, stdout, stderr });
    });
    child.stdin.on("error", () => undefined);
    child.stdin.end(script);
  });
}

/** The single-quoted shell word for `s`. */
export const shellQuote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/** Names a block assigns at the start of a line (`NODE1=$(…)`), kept for later blocks. */
export function assignedNames(script: string): string[] {
  return [...script.matchAll(/^([A-Za-z_][A-Za-z0-9_]*)=/gm)].map((m) => m[1]);
}

/**
 * A bash function `scp` standing in for `scp FILE root@ADDR:PATH` (a relative
 * PATH is under `/root/`, one ending in `/` gets the file's name): a copy to
 * PATH under the directory `dirs` maps ADDR to; an unknown address fails.
 */
export function scpStandIn(dirs: ReadonlyMap<string, string>): string {
  const cases = [...dirs]
    .map(([address, dir]) => `    ${address}) dir=${shellQuote(dir)} ;;`)
    .join("\n");
  return `# scp FILE root@ADDR:PATH, to a machine's directory
scp() {
  local src="$1" dest="$2" addr path dir
  addr="\${dest#*@}"; addr="\${addr%%:*}"; path="\${dest#*:}"
  case "$addr" in
${cases}
    *) echo "scp: no machine at $addr" >&2; return 1 ;;
  esac
  case "$path" in /*) ;; *) path="/root/$path" ;; esac
  case "$path" in */) path="$path$(basename "$src")" ;; esac
  mkdir -p "$(dirname "$dir$path")"
  cp "$src" "$dir$path"
}
`;
}

/** `script` with a machine's directory `dir` in place of the guides' `/var/lib/…` and `/root/…`. */
export const machinePaths = (script: string, dir: string) =>
  script.replace(/(^|[\s="'])\/(var\/lib|root)\//gm, `$1${dir}/$2/`);
