#!/usr/bin/env node
/**
 * `metropolis-node`: the node's init. `--help` is answered here, from
 * node-usage.ts alone; `install-service` loads install-service.ts (the
 * systemd unit); anything else loads the node (node-main.ts: grpc-js,
 * etcd's client, the protobuf code, x509, the supervision tree) and runs it.
 * This is the entry esbuild bundles into `bundle/metropolis-node.js`, the
 * package's `bin`.
 */
import { formatFatal } from "./boxed-error";
import { installServiceHelp, nodeHelp, wantsHelp, wantsInstallService } from "./node-usage";

const argv = process.argv.slice(2);
if (wantsInstallService(argv)) {
  if (wantsHelp(argv)) {
    process.stdout.write(installServiceHelp);
  } else {
    import("./install-service.js")
      .then(({ installService }) => installService(argv.slice(1)))
      .then(
        (code) => process.exit(code),
        (e: unknown) => {
          process.stderr.write(formatFatal("install-service failed", e) + "\n");
          process.exit(1);
        },
      );
  }
} else if (wantsHelp(argv)) {
  process.stdout.write(nodeHelp);
} else {
  import("./node-main.js").then(
    ({ runNode }) => runNode(),
    (e: unknown) => {
      process.stderr.write(formatFatal("the node's code could not be loaded", e) + "\n");
      process.exit(1);
    },
  );
}
