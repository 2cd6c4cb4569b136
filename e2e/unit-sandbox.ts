/**
 * A systemd unit of `metropolis-node install-service`, run the way systemd
 * would run it as far as the node can tell, where there is no systemd (the
 * test machines have none as PID 1): its `ExecStart`, exactly, exec'd in a
 * mount namespace of its own set up from the unit's own directives —
 *
 * - `ProtectSystem=strict`: every mount read-only but /dev, /proc, /sys and
 *   the `ReadWritePaths=` (bound onto themselves first);
 * - `PrivateTmp=yes`: a tmpfs on /tmp and /var/tmp;
 * - `TemporaryFileSystem=PATH:OPTIONS`: a tmpfs on PATH with OPTIONS;
 * - `CacheDirectory=NAME`: a writable /var/cache/NAME;
 * - `Environment=`, `LimitNOFILE=` (at most the hard limit where it cannot
 *   be raised: without CAP_SYS_RESOURCE), `UMask=`, `NoNewPrivileges=yes`
 *   (`setpriv --no-new-privs`); the working directory /;
 *
 * on a testbed host (`nsenter --net`). Every step is `exec`, so the PID
 * spawned is the node's: {@link SandboxedService.stop} is systemd's stop
 * with `KillMode=mixed` (SIGTERM to the node, SIGKILL to its process group
 * after the timeout). {@link EmulatedUnit} adds the restart policy
 * (`Restart=`, `RestartForceExitStatus=`, `RestartPreventExitStatus=`).
 * Not reproduced: the other `Protect*` directives, `RestrictSUIDSGID`,
 * `RestrictRealtime`, `LockPersonality`, `SystemCallArchitectures`
 * (seccomp filters), `RestartSec=` and the start limit.
 *
 * The namespace's mounts go with its last process: nothing to unmount.
 */
import type { ChildProcess } from "node:child_process";
import { closeSync, openSync, readlinkSync } from "node:fs";
import { processGroupMembers } from "../local-cluster/src/node-process";
import type { Testbed } from "../local-cluster/src/testbed";

/** A unit's `[Service]` directives: key → values in order. */
export type ServiceDirectives = ReadonlyMap<string, readonly string[]>;

/** The unit cannot be run here as asked. */
export class UnitSandboxError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UnitSandboxError";
  }
}

/** The `[Service]` section of a unit file. */
export function serviceDirectives(unit: string): ServiceDirectives {
  const directives = new Map<string, string[]>();
  let inService = false;
  for (const line of unit.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    if (line.startsWith("[")) {
      inService = line === "[Service]";
      continue;
    }
    const eq = line.indexOf("=");
    if (!inService || eq < 0) continue;
    const key = line.slice(0, eq);
    directives.set(key, [...(directives.get(key) ?? []), line.slice(eq + 1)]);
  }
  return directives;
}

/** The one value of `key`; undefined when there is none. @throws UnitSandboxError for several. */
function one(directives: ServiceDirectives, key: string): string | undefined {
  const values = directives.get(key) ?? [];
  if (values.length > 1) throw new UnitSandboxError(`${key}= is given ${values.length} times`);
  return values[0];
}

/**
 * The namespace's set-up, in bash: `$1` is this machine's own mount
 * namespace (it refuses to remount anything in it), the rest the command.
 * What to set up comes in SANDBOX_* variables.
 */
const setupScript = `set -euo pipefail
if [ "$(readlink /proc/self/ns/mnt)" = "$1" ]; then
  echo "unit sandbox: still in the machine's mount namespace: refusing to remount" >&2
  exit 97
fi
shift
IFS=' ' read -r -a rw <<< "\${SANDBOX_RW:-}"
for path in "\${rw[@]}"; do mount --bind "$path" "$path"; done
if [ "\${SANDBOX_STRICT:-}" = yes ]; then
  points=$(awk '{print $5}' /proc/self/mountinfo | sort -u)
  for point in $points; do
    keep=no
    case "$point" in /proc|/proc/*|/sys|/sys/*|/dev|/dev/*) keep=yes ;; esac
    for path in "\${rw[@]}"; do
      case "$point" in "$path"|"$path"/*) keep=yes ;; esac
    done
    if [ "$keep" = no ]; then
      mount -o remount,bind,ro "$point" 2>/dev/null || echo "unit sandbox: $point stays writable" >&2
    fi
  done
fi
if [ "\${SANDBOX_PRIVATE_TMP:-}" = yes ]; then
  mount -t tmpfs -o mode=1777 tmpfs /tmp
  mount -t tmpfs -o mode=1777 tmpfs /var/tmp
fi
if [ -n "\${SANDBOX_CACHE:-}" ]; then
  mount -t tmpfs -o mode=0755 tmpfs /var/cache
  mkdir -p "/var/cache/$SANDBOX_CACHE"
fi
if [ -n "\${SANDBOX_TMPFS:-}" ]; then
  mount -t tmpfs -o "\${SANDBOX_TMPFS#*:}" tmpfs "\${SANDBOX_TMPFS%%:*}"
fi
if [ -n "\${SANDBOX_NOFILE:-}" ]; then
  # Raising the hard limit needs CAP_SYS_RESOURCE, which systemd has and a container may not.
  ulimit -n "$SANDBOX_NOFILE" 2>/dev/null || ulimit -n "$(ulimit -Hn)"
fi
if [ -n "\${SANDBOX_UMASK:-}" ]; then umask "$SANDBOX_UMASK"; fi
cd /
unset SANDBOX_RW SANDBOX_STRICT SANDBOX_PRIVATE_TMP SANDBOX_CACHE SANDBOX_TMPFS SANDBOX_NOFILE SANDBOX_UMASK
if [ "\${SANDBOX_NNP:-}" = yes ]; then unset SANDBOX_NNP; exec setpriv --no-new-privs "$@"; fi
unset SANDBOX_NNP
exec "$@"
`;

/** How a sandboxed service ended. */
export interface ServiceExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** Options of {@link SandboxedService.start}. */
export interface SandboxedServiceOptions {
  /** The testbed the service runs on, and its host. */
  readonly testbed: Testbed;
  readonly host: number;
  /** The unit file's text. */
  readonly unit: string;
  /** Where the service's output goes (appended). */
  readonly logFile: string;
}

/** A unit's `ExecStart` running in its sandbox on a testbed host; see the module comment. */
export class SandboxedService {
  /** The PID of `ExecStart`'s process (also its process group's ID). */
  readonly pid: number;
  /** `ExecStart`, split into words. */
  readonly argv: readonly string[];
  /** Resolves once the process exited (never rejects). */
  readonly exited: Promise<ServiceExit>;
  /** After `stop()`: whether processes of its group outlived it (they were killed). */
  leftovers = false;
  private exit: ServiceExit | undefined;

  private constructor(child: ChildProcess, argv: readonly string[]) {
    if (child.pid === undefined) throw new UnitSandboxError(`could not start ${argv.join(" ")}`);
    this.pid = child.pid;
    this.argv = argv;
    this.exited = new Promise((resolve) =>
      child.once("exit", (code, signal) => {
        this.exit = { code, signal };
        resolve(this.exit);
      }),
    );
  }

  /**
   * Starts the unit's `ExecStart` in its sandbox on `host`.
   * @throws UnitSandboxError for a unit without one `ExecStart=`.
   */
  static start(opts: SandboxedServiceOptions): SandboxedService {
    const d = serviceDirectives(opts.unit);
    const execStart = one(d, "ExecStart");
    if (execStart === undefined) throw new UnitSandboxError("the unit has no ExecStart=");
    const argv = execStart.split(" ");
    const env: Record<string, string> = {
      PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    };
    for (const assignment of d.get("Environment") ?? []) {
      const eq = assignment.indexOf("=");
      if (eq > 0) env[assignment.slice(0, eq)] = assignment.slice(eq + 1);
    }
    const flag = (key: string) => (one(d, key) === "yes" ? "yes" : "");
    Object.assign(env, {
      SANDBOX_RW: (d.get("ReadWritePaths") ?? []).join(" "),
      SANDBOX_STRICT: one(d, "ProtectSystem") === "strict" ? "yes" : "",
      SANDBOX_PRIVATE_TMP: flag("PrivateTmp"),
      SANDBOX_CACHE: one(d, "CacheDirectory") ?? "",
      SANDBOX_TMPFS: one(d, "TemporaryFileSystem") ?? "",
      SANDBOX_NOFILE: one(d, "LimitNOFILE") ?? "",
      SANDBOX_UMASK: one(d, "UMask") ?? "",
      SANDBOX_NNP: flag("NoNewPrivileges"),
    });
    const ownMountNamespace = readMountNamespace("self");
    const log = openSync(opts.logFile, "a");
    try {
      const child = opts.testbed.spawn(
        opts.host,
        "unshare",
        [
          "--mount",
          "--propagation",
          "private",
          "bash",
          "-c",
          setupScript,
          "unit-sandbox",
          ownMountNamespace,
          ...argv,
        ],
        { stdio: ["ignore", log, log], detached: true, env },
      );
      return new SandboxedService(child, argv);
    } finally {
      closeSync(log);
    }
  }

  /** The mount namespace the service runs in, e.g. `mnt:[4026532301]`. */
  mountNamespace(): string {
    return readMountNamespace(String(this.pid));
  }

  /**
   * Stops it as systemd does with `KillMode=mixed`: SIGTERM to its PID, then
   * SIGKILL to its process group after `timeoutMs`, or at once to what is
   * left of the group once it exited (`leftovers` is then set).
   */
  async stop(timeoutMs: number): Promise<ServiceExit> {
    if (this.exit) return this.exit;
    signal(this.pid, "SIGTERM");
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<"timeout">((resolve) => {
      timer = setTimeout(() => resolve("timeout"), timeoutMs);
    });
    const outcome = await Promise.race([this.exited, timedOut]);
    clearTimeout(timer);
    if (outcome === "timeout") signal(-this.pid, "SIGKILL");
    const exit = await this.exited;
    const leftovers = await this.killLeftovers();
    this.leftovers = outcome !== "timeout" && leftovers;
    return exit;
  }

  /**
   * SIGKILL to what is left of its process group once it exited; resolves
   * with whether anything was (gone within 5 s).
   */
  async killLeftovers(): Promise<boolean> {
    await this.exited;
    if ((processGroupMembers(this.pid) ?? []).length === 0) return false;
    const deadline = Date.now() + 5000;
    while ((processGroupMembers(this.pid) ?? []).length > 0 && Date.now() < deadline) {
      signal(-this.pid, "SIGKILL");
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    return true;
  }
}

/** `readlink /proc/PID/ns/mnt`. */
function readMountNamespace(pid: string): string {
  return readlinkSync(`/proc/${pid}/ns/mnt`);
}

function signal(target: number, name: NodeJS.Signals): void {
  try {
    process.kill(target, name);
  } catch (e) {
    if (!(e instanceof Error && "code" in e && e.code === "ESRCH")) throw e;
  }
}

/** Signals whose death systemd counts as a clean exit (systemd.service(5), `Restart=`). */
const cleanSignals: readonly string[] = ["SIGHUP", "SIGINT", "SIGTERM", "SIGPIPE"];

/** An exit status list of a unit (`RestartForceExitStatus=75 …`): its numbers. */
function statuses(d: ServiceDirectives, key: string): number[] {
  return (d.get(key) ?? [])
    .flatMap((v) => v.split(" "))
    .filter((v) => /^[0-9]+$/.test(v))
    .map(Number);
}

/**
 * Whether systemd starts a service again after its main process ended with
 * `exit`, by the unit's `Restart=` (`no`, `always`, `on-failure`),
 * `RestartForceExitStatus=`, `RestartPreventExitStatus=` and the exit codes
 * of `SuccessExitStatus=`, as systemd.service(5) says: the force list
 * restarts whatever `Restart=` says, the prevent list never; `on-failure`
 * restarts what is not clean (an exit code other than 0 and the success
 * list, a death by a signal other than SIGHUP, SIGINT, SIGTERM, SIGPIPE).
 *
 * @throws UnitSandboxError for another `Restart=` (not used by our units).
 */
export function restartsAfter(d: ServiceDirectives, exit: ServiceExit): boolean {
  if (exit.code !== null && statuses(d, "RestartForceExitStatus").includes(exit.code)) return true;
  if (exit.code !== null && statuses(d, "RestartPreventExitStatus").includes(exit.code)) {
    return false;
  }
  const restart = one(d, "Restart") ?? "no";
  const clean =
    exit.code !== null
      ? exit.code === 0 || statuses(d, "SuccessExitStatus").includes(exit.code)
      : exit.signal !== null && cleanSignals.includes(exit.signal);
  switch (restart) {
    case "no":
      return false;
    case "always":
      return true;
    case "on-failure":
      return !clean;
    default:
      throw new UnitSandboxError(`Restart=${restart} is not emulated`);
  }
}

/** One run of a unit's service: how it ended, and whether its manager started it again. */
export interface UnitRun {
  readonly pid: number;
  readonly exit: ServiceExit;
  /** Whether processes of its group outlived it (killed then, as `KillMode=mixed` does). */
  readonly leftovers: boolean;
  readonly restarted: boolean;
}

/**
 * A unit under an emulated service manager: its `ExecStart` in its sandbox
 * ({@link SandboxedService}), started again after an exit when
 * {@link restartsAfter} says so — at once: `RestartSec=` is not waited for,
 * nor `StartLimitBurst=` counted — until `stop()`; `start()` is
 * `systemctl start`.
 */
export class EmulatedUnit {
  /** Every run that ended, in order. */
  readonly runs: UnitRun[] = [];
  private service: SandboxedService | undefined;
  /** Settles once the running service's end was handled (recorded, restarted). */
  private handled: Promise<void> = Promise.resolve();
  private stopping = false;
  private readonly directives: ServiceDirectives;

  constructor(private readonly opts: SandboxedServiceOptions) {
    this.directives = serviceDirectives(opts.unit);
  }

  /** The service's process now, if it runs. */
  get current(): SandboxedService | undefined {
    return this.service;
  }

  /** `systemctl start`: starts the service unless it runs. */
  start(): SandboxedService {
    this.stopping = false;
    if (this.service) return this.service;
    const service = SandboxedService.start(this.opts);
    this.service = service;
    this.handled = service.exited.then(async (exit) => {
      const leftovers = await service.killLeftovers();
      const restarted = !this.stopping && restartsAfter(this.directives, exit);
      this.runs.push({ pid: service.pid, exit, leftovers, restarted });
      this.service = undefined;
      if (restarted) this.start();
    });
    return service;
  }

  /**
   * `systemctl stop`: no more restarts; stops the running service (see
   * {@link SandboxedService.stop}) and resolves with its run, or undefined
   * when none ran.
   */
  async stop(timeoutMs: number): Promise<UnitRun | undefined> {
    this.stopping = true;
    const service = this.service;
    if (!service) return undefined;
    await service.stop(timeoutMs);
    await this.handled;
    return this.runs.find((run) => run.pid === service.pid);
  }
}
