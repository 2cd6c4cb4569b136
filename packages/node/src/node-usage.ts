/**
 * What `metropolis-node --help` prints, and the one-line usage that a bad
 * flag's error ends with. Apart from the configuration's parser
 * (`node-config.ts`, which needs the default ports of @metropolis/consensus
 * and @metropolis/curator and the workload checks of @metropolis/roleserve):
 * `--help` is answered from this module alone, before the node's code is
 * loaded. It imports nothing; the ports named here are checked against the
 * real defaults by a test (test/node-usage.test.ts).
 */

/** The command line, as errors about it end. */
export const usage =
  "usage: metropolis-node --root DIR --address IP [--parameters FILE] [--config FILE]\n" +
  "                       [--recover-from BACKUP --owner-key KEY]";

/** The whole help text of `metropolis-node --help`. */
export const nodeHelp = `${usage}

Runs one node of a Metropolis cluster until SIGTERM or SIGINT (exit 0). Decommissioned
with \`metroctl node decommission --wipe\`, it erases its data/ and esp/ and exits 0
(1 if the wipe fails).

Flags:
  --root DIR          the node's storage: esp/, data/, ephemeral/ (in memory) and its machine key
  --address IP        the node's IPv4 address: every port is bound there, and it is reached there
  --parameters FILE   node parameters from \`metroctl bootstrap-params\` or \`register-params\`
                      (copied to the ESP; needed only until the node has enrolled)
  --config FILE       JSON configuration (below)
  --recover-from BACKUP  restore the cluster from a backup (\`metroctl cluster backup\`) onto this
                      node, whose root must hold no node state; it becomes the cluster's one
                      consensus member. Checked first (format, hash, owner); refused changes nothing
  --owner-key KEY     with --recover-from: the owner's private key (metroctl's owner-key.pem)
  -h, --help          print this text and exit

Configuration file fields (all optional):
  ports               {consensus: 7834, curator: 7835, debug: 7837, metrics: 7838, plainMetrics}
  workloads           [{name, command, args?, env?}]: run while the node is a worker
  loopbackTimings     fast etcd elections for nodes on one machine (default false)
  leaderTtlSeconds    the curator's election lease (default 10)
  heartbeatTimeoutMs  the curator's heartbeat timeout (default 10000)
  ephemeralTmpfs      mount a tmpfs for ephemeral/ when root (default true)

Exit status: 0 stopped (SIGTERM, SIGINT, power off), 1 failed (enrolment, deletion from the
cluster), 2 bad flags or configuration, 75 reboot asked by the owner (start it again).

To run it as a systemd service: metropolis-node install-service --help
`;

/** The command line of `install-service`, as errors about it end. */
export const installServiceUsage =
  "usage: metropolis-node install-service --root DIR --address IP [--parameters FILE] [--config FILE]\n" +
  "                                       [--name NAME] [--unit-dir DIR] [--print]";

/** What `metropolis-node install-service --help` prints. */
export const installServiceHelp = `${installServiceUsage}

Writes a systemd unit that runs this metropolis-node with these flags, and creates the node's
root (mode 0700); then \`systemctl daemon-reload && systemctl enable --now NAME\` starts it.
The node's flags are checked as the node checks them before anything is written.

Flags:
  --root, --address, --parameters, --config   the node's flags (metropolis-node --help)
  --name NAME         the unit's name (default metropolis-node: metropolis-node.service)
  --unit-dir DIR      where the unit is written (default /etc/systemd/system)
  --print             print the unit on stdout; write and create nothing
  -h, --help          print this text and exit

The unit restarts the node on failure and after the owner's reboot (exit 75), never after a
power-off or a stop (exit 0) nor bad flags (exit 2); puts ephemeral/ on a tmpfs of its own; lets
the node write only under its root.

Exit status: 0 written (or printed), 1 could not write, 2 bad flags.
`;

/** Whether the command line is the `install-service` command. */
export function wantsInstallService(argv: readonly string[]): boolean {
  return argv[0] === "install-service";
}

/** Whether the command line asks for the help text (`-h` or `--help` anywhere in it). */
export function wantsHelp(argv: readonly string[]): boolean {
  return argv.includes("--help") || argv.includes("-h");
}
