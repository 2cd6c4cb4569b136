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
  "usage: metropolis-node --root DIR --address IP [--parameters FILE] [--config FILE]";

/** The whole help text of `metropolis-node --help`. */
export const nodeHelp = `${usage}

Runs one node of a Metropolis cluster until SIGTERM or SIGINT (exit 0).

Flags:
  --root DIR          the node's storage: esp/, data/, ephemeral/ (in memory) and its machine key
  --address IP        the node's IPv4 address: every port is bound there, and it is reached there
  --parameters FILE   node parameters from \`metroctl bootstrap-params\` or \`register-params\`
                      (copied to the ESP; needed only until the node has enrolled)
  --config FILE       JSON configuration (below)
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
`;

/** Whether the command line asks for the help text (`-h` or `--help` anywhere in it). */
export function wantsHelp(argv: readonly string[]): boolean {
  return argv.includes("--help") || argv.includes("-h");
}
