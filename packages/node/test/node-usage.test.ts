/**
 * `metropolis-node --help`: the text names the real default ports, and the
 * executable answers it without loading the node (tsc's output, dist/,
 * built by `tsc -b` before jest; the bundle: packages/metroctl/test/bundle.test.ts).
 */
import { execFile } from "node:child_process";
import { resolve } from "node:path";
import { defaultPeerPort } from "@metropolis/consensus";
import { defaultCuratorPort } from "@metropolis/curator";
import { defaultDebugPort } from "../src/debug-service";
import { defaultMetricsPort } from "../src/metrics-server";
import { nodeHelp, usage, wantsHelp } from "../src/node-usage";

const main = resolve(__dirname, "..", "dist", "main.js");

it("names the default ports the node uses", () => {
  expect(nodeHelp).toContain(
    `{consensus: ${defaultPeerPort}, curator: ${defaultCuratorPort}, debug: ${defaultDebugPort}, metrics: ${defaultMetricsPort}, plainMetrics}`,
  );
  expect(nodeHelp.startsWith(`${usage}\n`)).toBe(true);
});

it("takes -h and --help anywhere on the command line", () => {
  expect(wantsHelp(["--help"])).toBe(true);
  expect(wantsHelp(["--root", "r", "-h"])).toBe(true);
  expect(wantsHelp(["--root", "r", "--address", "127.0.0.2"])).toBe(false);
});

it("answers --help with exit 0 without loading the node's code", async () => {
  const script = `
    process.argv = [process.execPath, ${JSON.stringify(main)}, "--help"];
    process.on("exit", () => process.stderr.write(JSON.stringify(Object.keys(require.cache))));
    require(${JSON.stringify(main)});`;
  const { stdout, stderr } = await new Promise<{ stdout: string; stderr: string }>((done, fail) =>
    execFile(process.execPath, ["-e", script], { timeout: 20_000 }, (err, stdout, stderr) =>
      err ? fail(err) : done({ stdout, stderr }),
    ),
  );
  expect(stdout).toBe(nodeHelp);
  const loaded: unknown = JSON.parse(stderr);
  expect(Array.isArray(loaded) ? loaded.map((f) => String(f).split("/").pop()) : loaded).toEqual([
    "main.js",
    "boxed-error.js",
    "node-usage.js",
  ]);
});
