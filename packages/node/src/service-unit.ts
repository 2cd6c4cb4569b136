/**
 * The systemd unit that runs `metropolis-node` as a service on a real
 * machine, rendered from the flags the node itself takes (`--root`,
 * `--address`, `--parameters`, `--config`): `metropolis-node
 * install-service` (install-service.ts) writes it, `--print` shows it.
 *
 * What the unit says, and why:
 *
 * - Restarts: `Restart=on-failure` (a crash, a kill, exit 1) and
 *   `RestartForceExitStatus=75`, the status the node exits with after the
 *   owner's `metroctl node reboot` ({@link rebootExitStatus}). A power-off
 *   (`metroctl node poweroff`) and a stop by SIGTERM exit 0, which
 *   `on-failure` never restarts: the node stays off. Exit 2 (bad flags or
 *   configuration) is not restarted either (`RestartPreventExitStatus=2`):
 *   starting again does not fix a file. `StartLimitBurst` ends a loop of
 *   failures (a deleted node exits 1 at every start).
 * - Stopping: SIGTERM to the node only (`KillMode=mixed`): it stops its
 *   supervision tree, etcd and workloads included, within 20 s; whatever is
 *   left after `TimeoutStopSec` is killed, as local-cluster does.
 * - `ephemeral/` (the plain etcd peer key, sockets): a tmpfs the service
 *   gets from systemd (`TemporaryFileSystem=`, mode 0700, nosuid, nodev),
 *   in the service's own mount namespace: the node finds it mounted and
 *   uses it (see @metropolis/localstorage's in-memory-placement.ts), and its
 *   memory is freed when the service's last process ends, a SIGKILL
 *   included.
 * - Hardening the node runs under: it runs as root (it unmounts that tmpfs
 *   at a graceful stop, which needs CAP_SYS_ADMIN, and its workloads are the
 *   machine's), with `NoNewPrivileges`, `ProtectSystem=strict` (everything
 *   read-only but `--root` and the bundle's code cache directory),
 *   `ProtectHome=read-only` (the binary or parameters may sit in a home),
 *   `PrivateTmp`, the kernel, clock, hostname and control-group
 *   protections, native system calls only, and `UMask=0077` (what it writes
 *   is its own). Not
 *   `MemoryDenyWriteExecute` (V8 compiles to executable memory), nor a
 *   capability bounding set, nor `RestrictNamespaces` (workloads may need
 *   them).
 */
import { rebootExitStatus } from "./node-management";

/** What the unit runs; every path absolute. */
export interface ServiceUnitOptions {
  /** The command that starts the node: the executable, then its arguments before the node's flags. */
  readonly command: readonly string[];
  /** `--root`: the node's storage; the only place it may write. */
  readonly root: string;
  /** `--address`: the node's IPv4 address. */
  readonly address: string;
  /** `--parameters`, when given. */
  readonly parametersPath?: string;
  /** `--config`, when given. */
  readonly configPath?: string;
  /** The unit's name without `.service`; names its cache directory. */
  readonly name: string;
}

/** `LimitNOFILE` of the unit: etcd and the node's gRPC servers hold a descriptor per connection. */
export const serviceFileLimit = 1048576;

/** `TimeoutStopSec` of the unit: the node's own graceful stop gives up after 20 s. */
export const serviceStopTimeoutSeconds = 30;

/**
 * Characters a path (or the address, or an argument) may have in the unit:
 * none that systemd reads as a specifier (`%`), a variable (`$`), a list
 * separator (whitespace), an option separator (`:` in
 * `TemporaryFileSystem=`) or a quote.
 */
const unitSafe = /^[A-Za-z0-9/._+@-]+$/;

/** Whether `value` can be written into the unit as it is (see {@link unitSafe}). */
export function isUnitSafe(value: string): boolean {
  return unitSafe.test(value);
}

/** The node's command line in the unit, as the service manager runs it. */
export function serviceCommandLine(options: ServiceUnitOptions): string[] {
  return [
    ...options.command,
    "--root",
    options.root,
    "--address",
    options.address,
    ...(options.parametersPath === undefined ? [] : ["--parameters", options.parametersPath]),
    ...(options.configPath === undefined ? [] : ["--config", options.configPath]),
  ];
}

/**
 * The unit file's text. Every value must be {@link isUnitSafe} (the caller,
 * install-service.ts, refuses others with a clear error) and every path
 * absolute.
 */
export function renderServiceUnit(options: ServiceUnitOptions): string {
  const root = options.root;
  const cacheDir = `/var/cache/${options.name}`;
  return `# ${options.name}.service: one node of a Metropolis cluster, at ${options.address}.
# Written by \`metropolis-node install-service\`; run it again to change the unit.

[Unit]
Description=Metropolis node at ${options.address} (root ${root})
Wants=network-online.target
After=network-online.target
# A node that fails at every start (one deleted from its cluster exits 1) stops being started.
StartLimitIntervalSec=600
StartLimitBurst=10

[Service]
Type=exec
ExecStart=${serviceCommandLine(options).join(" ")}

# Exit ${rebootExitStatus} is the owner's \`metroctl node reboot\`: start it again. Exit 0 (SIGTERM,
# the owner's \`metroctl node poweroff\`) is a clean stop, never restarted; exit 2 (bad flags or
# configuration) neither, since starting again does not fix it; any other failure is.
Restart=on-failure
RestartSec=5s
RestartForceExitStatus=${rebootExitStatus}
RestartPreventExitStatus=2

# SIGTERM to the node alone: it stops etcd and its workloads itself, within 20 s.
KillMode=mixed
TimeoutStopSec=${serviceStopTimeoutSeconds}s

LimitNOFILE=${serviceFileLimit}

# ephemeral/ in memory: a tmpfs of the service's own, freed when its last process ends.
TemporaryFileSystem=${root}/ephemeral:mode=0700,nosuid,nodev

# The executable's code cache (the bundle's launcher keeps it under $XDG_CACHE_HOME).
CacheDirectory=${options.name}
Environment=XDG_CACHE_HOME=${cacheDir}

NoNewPrivileges=yes
ProtectSystem=strict
ReadWritePaths=${root}
ProtectHome=read-only
PrivateTmp=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectClock=yes
ProtectHostname=yes
RestrictSUIDSGID=yes
RestrictRealtime=yes
LockPersonality=yes
SystemCallArchitectures=native
UMask=0077

[Install]
WantedBy=multi-user.target
`;
}
