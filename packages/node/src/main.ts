#!/usr/bin/env node
/**
 * `metropolis-node`: the node's init. `--help` is answered here, from
 * node-usage.ts alone; anything else loads the node (node-main.ts: grpc-js,
 * etcd's client, the protobuf code, x509, the supervision tree) and runs it.
 * This is the entry esbuild bundles into `bundle/metropolis-node.js`, the
 * package's `bin`.
 */
import { formatFatal } from "./boxed-error";
import { nodeHelp, wantsHelp } from "./node-usage";

if (wantsHelp(process.argv.slice(2))) {
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
