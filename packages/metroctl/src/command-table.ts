/**
 * metroctl's command table: every command with its arguments, flags and
 * description, and a handler that loads the command's code when the command
 * runs. Building the table loads only commander and the flag defaults, so
 * `metroctl --help`, `completion` and `version` answer without loading
 * grpc-js, the protobuf code, x509 or the CEL engine; a command that runs
 * loads what it needs (`import()`), and nothing else.
 *
 * The order here is the order of `metroctl --help`.
 */
import { Argument, Option, type Command } from "commander";
import type { BootstrapParamsOptions } from "./node-params";
import type { AccessIssueOptions } from "./access-commands";
import type { BackupOptions } from "./cluster-backup";
import type { DirectoryOptions } from "./cluster-directory";
import { completionScript, completionShells } from "./completion";
import type { LogsOptions, ReportsOptions, TreeOptions } from "./debug-commands";
import { collectValues, type CommandDefiners } from "./define-command";
import {
  bypassChecks,
  configureFieldNames,
  defaultDebugPort,
  defaultMetricsPort,
  defaultNodeTimeoutMs,
  defaultObserverPort,
  defaultPollIntervalMs,
  defaultRollingRebootTimeoutMs,
  defaultWaitTimeoutMs,
  logLevelNames,
  metricsExporters,
} from "./flag-defaults";
import { addListingOptions, type ListingOptions } from "./listing-options";
import type { NodeLogsOptions, NodePowerOptions } from "./node-management-commands";
import type { DefragOptions } from "./consensus-commands";
import type { DecommissionOptions } from "./node-decommission";
import type { SetRoleOptions } from "./node-changes";
import type { RollingRebootOptions } from "./rolling-reboot";
import type { SupportOptions } from "./support-bundle";
import type { ObserveOptions } from "./observe/observe-command";
import {
  listingFormatOption,
  outputFormatOption,
  type ListingFormat,
  type OutputFormat,
} from "./output-formats";
import { metroctlVersion } from "./version";
import type { WaitOptions } from "./wait-command";

/** Adds `--debug-port` to a command that dials nodes' Debug service. */
const debugPortOption = (command: Command) =>
  command.option(
    "--debug-port <port>",
    `port of the node's Debug service (default ${defaultDebugPort})`,
  );

/** The `--debug-port` help of the NodeManagement commands. */
const nodeManagementPortHelp = `port of the node's Debug and NodeManagement service (default ${defaultDebugPort})`;

/** Adds every command of metroctl to `program`. */
export function addCommands(program: Command, { define, defineLocal }: CommandDefiners): void {
  define<BootstrapParamsOptions>("bootstrap-params", async (ctx, _args, opts) =>
    (await import("./node-params.js")).bootstrapParams(ctx, opts),
  )
    .description(
      "write NodeParameters that make a node bootstrap a new cluster owned by the owner key (created if missing)",
    )
    .requiredOption("-o, --output <file>", "where to write the parameters")
    .option("--label <key=value>", "label of the first node (repeatable)", collectValues, [])
    .option(
      "--storage-policy <policy>",
      "the cluster's initial storage policy: insecure, encrypted (default) or authenticated-encrypted",
    )
    .option(
      "--heartbeat-timeout-ms <ms>",
      "the cluster's initial heartbeat timeout (1000 to 3600000; default: each curator's own, 10 s)",
    );
  define<{ output: string; label: string[] }>("register-params", async (ctx, _args, opts) =>
    (await import("./node-params.js")).registerParams(ctx, opts),
  )
    .description(
      "write NodeParameters that make a node register into the cluster (ticket, directory and CA fetched from it)",
    )
    .requiredOption("-o, --output <file>", "where to write the parameters")
    .option("--label <key=value>", "label of the new node (repeatable)", collectValues, []);

  define<{ caSha256?: string }>("takeownership", async (ctx, _args, opts) =>
    (await import("./take-ownership.js")).takeOwnership(ctx, opts),
  )
    .description(
      "escrow the owner certificate from a freshly bootstrapped cluster with the owner key (learns the cluster CA on first use)",
    )
    .option(
      "--ca-sha256 <hex>",
      "the SHA-256 of the cluster CA certificate to expect, instead of trusting the one presented",
    );

  addListingOptions(
    define<ListingOptions>("nodes", async (ctx, _args, opts) =>
      (await import("./nodes-command.js")).listNodes(ctx, opts),
    ).description("list the cluster's nodes: id, address, state, roles, health, last heartbeat"),
  );

  addListingOptions(
    define<ListingOptions>("approve", async (ctx, [id], opts) =>
      (await import("./node-changes.js")).approveOrList(ctx, id, opts),
    )
      .description(
        "let a NEW node into the cluster (it becomes STANDBY and then commits); without an ID, list the nodes waiting for approval",
      )
      .argument("[id]", "node ID"),
  );
  const onOff = (name: string, role: string) =>
    new Option(`--${name} <on|off>`, `give or take away the ${role} role`);
  define<SetRoleOptions>("set-role", async (ctx, [id], opts) =>
    (await import("./node-changes.js")).setRole(ctx, id, opts),
  )
    .description("give or take away roles of a node")
    .argument("<id>", "node ID")
    .addOption(onOff("consensus", "consensus member (etcd + curator)"))
    .addOption(onOff("controller", "Kubernetes controller"))
    .addOption(onOff("worker", "Kubernetes worker"))
    .option(
      "--force",
      "with --consensus off: skip the quorum check (refused when fewer healthy etcd voters than a quorum would remain, or another member is a learner or unhealthy)",
    );
  define("label", async (ctx, [id, ...changes]) =>
    (await import("./node-changes.js")).labelNode(ctx, id, changes),
  )
    .description("set (key=value) or remove (key-) labels of a node")
    .argument("<id>", "node ID")
    .argument("<changes...>", "key=value to set, key- to remove");
  define<{ bypass: string[] }>("delete", async (ctx, [id], opts) =>
    (await import("./node-changes.js")).deleteNode(ctx, id, opts),
  )
    .description(
      "remove a node from the cluster (refused while it has roles or is UP, unless bypassed)",
    )
    .argument("<id>", "node ID")
    .option(
      "--bypass <checks>",
      `safety checks to skip: ${bypassChecks.join(", ")} (comma-separated or repeated)`,
      collectValues,
      [],
    );

  define<{ output: OutputFormat }>("cluster-info", async (ctx, _args, opts) =>
    (await import("./cluster-info.js")).clusterInfo(ctx, opts),
  )
    .description("show the cluster's CA, storage policy and UP nodes")
    .addOption(outputFormatOption());

  define<{ output: OutputFormat }>("cluster configure", async (ctx, args, opts) =>
    (await import("./cluster-configure.js")).clusterConfigure(ctx, args, opts),
  )
    .description(
      `read or change the cluster configuration: get [FIELD], set FIELD VALUE (fields: ${configureFieldNames.join(", ")})`,
    )
    .addArgument(new Argument("<action>", "get or set").choices(["get", "set"]))
    .argument("[field-and-value...]", "get [FIELD] | set FIELD VALUE")
    .addOption(outputFormatOption());

  define<{ output: OutputFormat }>("cluster members", async (ctx, _args, opts) =>
    (await import("./cluster-members.js")).clusterMembers(ctx, opts),
  )
    .description(
      "show the etcd members (voter or learner, raft leader, reachable, curator) and how many failures the cluster survives",
    )
    .addOption(outputFormatOption());

  define<{ force?: boolean }>("cluster remove-member", async (ctx, [memberId], opts) =>
    (await import("./consensus-commands.js")).removeMember(ctx, memberId, opts),
  )
    .description(
      "remove an etcd member that no node holding the consensus role accounts for (refused when it would lose quorum)",
    )
    .argument("<member-id>", "the member's ID, hex, as `cluster members` prints it")
    .option("--force", "skip the quorum check (says what it risks)");
  define("cluster move-leader", async (ctx, [nodeId]) =>
    (await import("./consensus-commands.js")).moveLeader(ctx, nodeId),
  )
    .description(
      "hand raft leadership to another healthy voter (works while the curator leader's etcd member leads raft)",
    )
    .argument("<node-id>", "the node whose etcd member is to lead raft");
  define<DefragOptions>("cluster defrag", async (ctx, _args, opts) =>
    (await import("./consensus-commands.js")).defrag(ctx, opts),
  )
    .description(
      "defragment the curator leader's etcd member, or (--node) any node's, through that node (refused when the others would not form a quorum meanwhile). The member stalls while it runs: on the curator leader's node the leader may step down (a failover of a few seconds), so defragment the other members first",
    )
    .option(
      "--node <id>",
      "defragment this node's etcd member, through the node's NodeManagement service (warns when it is the curator leader's node)",
    )
    .option("--force", "skip the quorum check (says what it risks)")
    .option("--debug-port <port>", `with --node: ${nodeManagementPortHelp}`)
    .addOption(outputFormatOption());
  define<{ alarm?: string; output: OutputFormat }>("cluster alarms", async (ctx, args, opts) =>
    (await import("./consensus-commands.js")).alarms(ctx, args, opts),
  )
    .description("list etcd's alarms (list, the default), or disarm a member's (disarm MEMBER_ID)")
    .addArgument(new Argument("[action]", "list or disarm").choices(["list", "disarm"]))
    .argument("[member-id]", "disarm: the member's ID, hex")
    .option("--alarm <alarm>", "disarm: only this alarm, nospace or corrupt (default: every alarm)")
    .addOption(outputFormatOption());

  define<{ output: OutputFormat }>("cluster health", async (ctx, _args, opts) =>
    (await import("./cluster-health-command.js")).clusterHealth(ctx, opts),
  )
    .description(
      "check the cluster's health (curator leader, nodes UP and heartbeating, etcd members, voters, alarms, database size, clocks, access credentials expiring, versions): one line per check with ok, warn or FAIL; exit 1 if any failed",
    )
    .addOption(outputFormatOption());
  define<SupportOptions>("support", async (ctx, _args, opts) =>
    (await import("./support-bundle.js")).supportBundle(ctx, opts),
  )
    .description(
      "write a support bundle (.tar.gz, 0600): the cluster's health, members, configuration, versions; each node's description, tree, reports, last 1,000 log lines and metrics; no secrets",
    )
    .requiredOption("-o, --output <file>", "where to write it, e.g. support.tar.gz")
    .option(
      "--node-timeout <seconds>",
      `how long each node may take to answer each item (default ${defaultNodeTimeoutMs / 1000})`,
    )
    .option("--debug-port <port>", `port of the nodes' Debug service (default ${defaultDebugPort})`)
    .option(
      "--metrics-port <port>",
      `port of the nodes' metrics endpoint (default ${defaultMetricsPort})`,
    );

  define<BackupOptions>("cluster backup", async (ctx, _args, opts) =>
    (await import("./cluster-backup.js")).clusterBackup(ctx, opts),
  )
    .description(
      "write a backup of the cluster: a snapshot of etcd with the secrets keyring sealed to the owner key (restore: metropolis-node --recover-from)",
    )
    .requiredOption(
      "-o, --output <file>",
      "where to write the backup (mode 0600, written atomically)",
    )
    .addOption(
      new Option("--format <format>", "what to print").choices(["table", "json"]).default("table"),
    );

  define<DirectoryOptions>("cluster directory", async (ctx, _args, opts) =>
    (await import("./cluster-directory.js")).clusterDirectory(ctx, opts),
  )
    .description(
      "write the cluster directory (every UP node's ID, public key and address, and which are consensus members) as nodes keep it: copy it to a former node's <root>/esp/metropolis/cluster_directory.pb after a restore",
    )
    .requiredOption(
      "-o, --output <file>",
      "where to write the directory (mode 0644, written atomically)",
    )
    .addOption(
      new Option("--format <format>", "what to print").choices(["table", "json"]).default("table"),
    );

  define<AccessIssueOptions>("access issue", async (ctx, _args, opts) =>
    (await import("./access-commands.js")).accessIssue(ctx, opts),
  )
    .description(
      "issue a scoped credential (reader, operator or backup) with an expiry, written as a metroctl config dir for that person (the key is made here; only its public key goes to the cluster)",
    )
    .requiredOption("--role <role>", "reader, operator or backup")
    .requiredOption("--name <name>", "whom it is for: 1-48 of a-z 0-9 . _ -")
    .requiredOption(
      "--ttl <duration>",
      "how long it is valid, e.g. 30s, 15m, 24h, 7d (at most 366d)",
    )
    .requiredOption("-o, --output <dir>", "the config dir to write (must hold no key yet)");
  define<{ output: OutputFormat }>("access list", async (ctx, _args, opts) =>
    (await import("./access-commands.js")).accessList(ctx, opts),
  )
    .description("list the scoped credentials issued: name, role, serial, expiry, status")
    .addOption(outputFormatOption());
  define("access revoke", async (ctx, [target]) =>
    (await import("./access-commands.js")).accessRevoke(ctx, target),
  )
    .description(
      "revoke scoped credentials, every one of a name or one by serial (through the cluster CA's revocation list)",
    )
    .argument("<name|serial>", "the name issued to, or a serial as `access list` prints it");

  define<{ output: OutputFormat }>("rotate-secrets-key", async (ctx, _args, opts) =>
    (await import("./rotate-secrets-key.js")).rotateSecretsKey(ctx, opts),
  )
    .description(
      "rotate the key that seals the cluster's secrets in etcd (re-seals them all, retires the old key)",
    )
    .addOption(outputFormatOption());

  define<WaitOptions>("wait", async (ctx, [id], opts) =>
    (await import("./wait-command.js")).waitForNode(ctx, id, opts),
  )
    .description("wait until a node is in a state and/or health")
    .argument("<id>", "node ID")
    .option("--state <state>", "NEW, STANDBY, UP or DECOMMISSIONED")
    .option("--health <health>", "UNKNOWN, HEALTHY or HEARTBEAT_TIMEOUT")
    .option(
      "--timeout <seconds>",
      `give up after this long (default ${defaultWaitTimeoutMs / 1000})`,
    )
    .option("--interval <seconds>", `poll this often (default ${defaultPollIntervalMs / 1000})`);

  debugPortOption(
    define<LogsOptions>("logs", async (ctx, [id, dn], opts) =>
      (await import("./debug-commands.js")).nodeLogs(ctx, id, dn, opts),
    )
      .description("print a node's logs (time level dn message), of one DN and below")
      .argument("<id>", "node ID")
      .argument("[dn]", "DN prefix, e.g. root.role.curator (default: everything)")
      .option("--tail <n>", "only the last n backlogged lines")
      .option("-f, --follow", "keep printing new lines until interrupted"),
  );
  debugPortOption(
    define<TreeOptions>("tree", async (ctx, [id], opts) =>
      (await import("./debug-commands.js")).nodeTree(ctx, id, opts),
    )
      .description("draw a node's supervision tree with states, restarts and last errors")
      .argument("<id>", "node ID")
      .option("-w, --watch", "redraw it after every change until interrupted")
      .addOption(outputFormatOption()),
  );
  debugPortOption(
    define<ReportsOptions>("reports", async (ctx, [id], opts) =>
      (await import("./debug-commands.js")).nodeReports(ctx, id, opts),
    )
      .description(
        "print a node's supervisor reports (time kind dn detail): started, healthy, done, died, restart-scheduled, given-up, escalated",
      )
      .argument("<id>", "node ID")
      .option("--dn <prefix>", "only reports of this DN and below, e.g. root.roleserver")
      .option("--backlog <n>", "only the last n kept reports (default: all the node keeps)")
      .option("-f, --follow", "keep printing new reports until interrupted")
      .addOption(outputFormatOption()),
  );

  define<{ output: ListingFormat }>("node describe", async (ctx, [id], opts) =>
    (await import("./node-describe.js")).describeNode(ctx, id, opts),
  )
    .description(
      "everything known about a node: status, roles, labels, address, consensus, curator and leadership",
    )
    .argument("<id>", "node ID")
    .addOption(listingFormatOption());

  defineLocal("completion", (io, [shell]) => {
    io.stdout.write(completionScript(shell, program));
    return Promise.resolve();
  })
    .description("print a shell completion script for metroctl's commands and flags")
    .addArgument(new Argument("<shell>", "the shell to complete in").choices(completionShells));

  define<{ metricsPort?: string }>("node metrics", async (ctx, [id, exporter], opts) =>
    (await import("./metrics-command.js")).nodeMetrics(ctx, id, exporter, opts),
  )
    .description(
      "print a node's Prometheus metrics over mTLS: core (default), node (host, process) or etcd",
    )
    .argument("<id>", "node ID")
    .argument("[exporter]", `one of ${metricsExporters.join(", ")} (default core)`)
    .option(
      "--metrics-port <port>",
      `port of the node's metrics endpoint (default ${defaultMetricsPort})`,
    );

  define<NodeLogsOptions>("node logs", async (ctx, [id], opts) =>
    (await import("./node-management-commands.js")).nodeManagementLogs(ctx, id, opts),
  )
    .description("print a node's logs (owner only), filtered; -f streams new ones")
    .argument("<id>", "node ID")
    .option("--dn <dn>", "only this DN and the DNs below it (default: the whole tree)")
    .option("--exact", "only the DN itself, not the DNs below it")
    .option("--level <level>", `minimum severity: ${logLevelNames.join(", ")}`)
    .option("--leveled-only", "only leveled entries (debug, info, warn, error), no raw ones")
    .option("--backlog <n>", "how many past entries to print first, or all (default all)")
    .option("-f, --follow", "then print new entries as they are logged, until interrupted")
    .option("--concise", "print just `time level message`")
    .option("--debug-port <port>", nodeManagementPortHelp);
  const quorumForce =
    "skip the curator's quorum check (refused when fewer healthy etcd voters than a quorum would remain, or another member is a learner or unhealthy); says what it risks";
  define<NodePowerOptions>("node reboot", async (ctx, [id], opts) =>
    (await import("./node-management-commands.js")).nodePower(ctx, id, "reboot", opts),
  )
    .description(
      "reboot a node: it stops gracefully and its service manager (local-cluster) starts it again; quorum-checked first",
    )
    .argument("<id>", "node ID")
    .option("--force", quorumForce)
    .option("--debug-port <port>", nodeManagementPortHelp);
  define<RollingRebootOptions>("cluster rolling-reboot", async (ctx, _args, opts) =>
    (await import("./rolling-reboot.js")).rollingReboot(ctx, opts),
  )
    .description(
      "reboot UP nodes one step at a time: workers first, then each consensus member, the curator leader last; each step quorum-checked, the next only once the last is back (new boot, UP, HEALTHY, voting); stops at the first node that does not come back",
    )
    .option("--nodes <ids>", "only these nodes, comma-separated (default: every UP node)")
    .option("--max-unavailable <n>", "workers rebooted at once (members always one by one)", "1")
    .option(
      "--timeout <seconds>",
      `how long each step may take to come back (default ${defaultRollingRebootTimeoutMs / 1000})`,
    )
    .option("--debug-port <port>", nodeManagementPortHelp);
  define<NodePowerOptions>("node poweroff", async (ctx, [id], opts) =>
    (await import("./node-management-commands.js")).nodePower(ctx, id, "poweroff", opts),
  )
    .description("power a node off: it stops gracefully and stays stopped; quorum-checked first")
    .argument("<id>", "node ID")
    .option("--force", quorumForce)
    .option("--debug-port <port>", nodeManagementPortHelp);
  define<DecommissionOptions>("node decommission", async (ctx, [id], opts) =>
    (await import("./node-decommission.js")).decommissionNode(ctx, id, opts),
  )
    .description(
      "take an UP node out of service for good: its etcd member removed first, then its roles; its certificate revoked; DECOMMISSIONED (quorum-checked)",
    )
    .argument("<id>", "node ID")
    .option("--force", quorumForce)
    .option(
      "--wipe",
      "and have the node erase its storage (data and ESP) and power off, on its record's word; fails if the node does not acknowledge it",
    )
    .addOption(outputFormatOption());

  debugPortOption(
    define<ObserveOptions>("observe", async (ctx, _args, opts) =>
      (await import("./observe/observe-command.js")).observe(ctx, opts),
    )
      .description(
        "serve a live view of the cluster (nodes, supervision trees, reports, logs) to a browser on 127.0.0.1; prints its URL",
      )
      .option(
        "--port <port>",
        `port on 127.0.0.1 (default ${defaultObserverPort}; 0: any free one)`,
      ),
  );

  defineLocal("version", async (io) => {
    io.stdout.write(`metroctl ${await metroctlVersion()}\n`);
  }).description("print metroctl's version");
}
