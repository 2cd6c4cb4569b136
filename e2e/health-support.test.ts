/**
 * e2e health and support (issue 38 part 5): a 3-node cluster of real
 * `metropolis-node` processes (every node a consensus member), driven by
 * the owner's metroctl.
 *
 * - `cluster health`: every check ok and exit status 0 on the healthy
 *   cluster; one node (not the curator leader) stopped, the `nodes-up`
 *   check fails naming it, and the exit status is 1.
 * - `support -o FILE.tar.gz` with that node down: the file is 0600, holds
 *   the cluster's part and, per node, its description; the running nodes'
 *   tree, reports, logs (at most 1,000 lines) and metrics; for the stopped
 *   node, `unreachable.txt` saying why. And no secret: every private key
 *   the test can find — the owner's key in metroctl's config dir, each
 *   node's machine key, every PEM private key in a file of the nodes' roots
 *   (ephemeral/ included: the plain copies a running node keeps there) — is
 *   looked for in the bundle's bytes as raw bytes, hex, base64, base64url
 *   and PEM, and none is found.
 */
import { createPrivateKey } from "node:crypto";
import { lstatSync, readdirSync, readFileSync, statSync, type Stats } from "node:fs";
import { join } from "node:path";
import { createGunzip } from "node:zlib";
import { Readable } from "node:stream";
import { extract } from "tar-stream";
import { eventually } from "@metropolis/supervisor/testing";
import type { ClusterHealthView } from "../packages/metroctl/src/health-view";
import type { ClusterNode } from "../local-cluster/src/cluster-launcher";
import { E2eCluster } from "./e2e-cluster";

jest.setTimeout(300_000);

let e2e: E2eCluster;

beforeAll(async () => {
  e2e = await E2eCluster.create("health-support", { nodes: 3 });
  await e2e.up();
});

afterAll(async () => {
  await e2e?.teardown();
});

/** `cluster health -o json`, with its exit status. */
async function health(): Promise<{ code: number; view: ClusterHealthView }> {
  const res = await e2e.cluster.metroctl(["cluster", "health", "-o", "json"]);
  const view: ClusterHealthView = JSON.parse(res.stdout);
  return { code: res.exitCode, view };
}

/** The names of the checks whose verdict is not ok, with their details. */
const notOk = (view: ClusterHealthView) =>
  view.checks.filter((c) => c.verdict !== "ok").map((c) => `${c.name}: ${c.detail}`);

/** The stopped node, once the second test stopped it. */
let stopped: ClusterNode | undefined;

it("cluster health: every check ok on a healthy cluster, exit status 0", async () => {
  await e2e.allHealthy(e2e.cluster.nodes);
  // Right after up() a clock sample or a member's raft contact may not be in yet: poll.
  const healthy = await eventually(
    async () => {
      const h = await health();
      return h.code === 0 && notOk(h.view).length === 0 ? h.view : false;
    },
    "every health check ok",
    { timeoutMs: 60_000, intervalMs: 1000 },
  ).catch(async (e: unknown) => {
    throw new Error(`${String(e)}; last: ${JSON.stringify(notOk((await health()).view))}`);
  });
  expect(healthy.checks.map((c) => c.name)).toEqual([
    "curator-leader",
    "nodes-up",
    "etcd-members",
    "etcd-voters",
    "etcd-alarms",
    "etcd-database-size",
    "clock-skew",
    "access-expiry",
    "versions",
  ]);
  expect(healthy.checks.find((c) => c.name === "nodes-up")?.detail).toBe(
    "3 nodes UP and heartbeating",
  );
  expect(healthy.checks.find((c) => c.name === "etcd-voters")?.detail).toBe("3 voters");
  // Every member's own database reading, the two others' carried by their nodes' heartbeats.
  expect(healthy.checks.find((c) => c.name === "etcd-database-size")?.detail).toMatch(
    /^\d+\.\d MiB of \d+\.\d MiB \(\d+\.\d %\) on node metropolis-[0-9a-f]+'s member, the largest share of 3 members$/,
  );
  const text = await e2e.cluster.metroctl(["cluster", "health"]);
  expect(text.exitCode).toBe(0);
  expect(text.stdout.trimEnd().split("\n").at(-1)).toBe("healthy");
});

it("cluster health: a stopped node fails nodes-up, exit status 1", async () => {
  const nodes = e2e.cluster.nodes;
  const leader = await e2e.agreedLeader(nodes);
  const victim = nodes.find((n) => n.id !== leader);
  if (victim === undefined) throw new Error("no node but the leader");
  await e2e.cluster.stopNode(victim);
  stopped = victim;
  // The heartbeat timeout (local-cluster sets one of a few seconds) has to pass first.
  const failing = await eventually(
    async () => {
      const h = await health();
      const check = h.view.checks.find((c) => c.name === "nodes-up");
      return check?.verdict === "fail" ? { ...h, check } : false;
    },
    "nodes-up to fail",
    { timeoutMs: 60_000, intervalMs: 1000 },
  );
  expect(failing.code).toBe(1);
  expect(failing.view.verdict).toBe("fail");
  expect(failing.check.nodeIds).toEqual([victim.id]);
  expect(failing.check.detail).toMatch(
    new RegExp(
      `^1 of 3 UP nodes not heartbeating \\(timeout \\d+ s\\): ${victim.id} \\(last heartbeat \\d+ s ago\\)$`,
    ),
  );
  const text = await e2e.cluster.metroctl(["cluster", "health"]);
  expect(text.exitCode).toBe(1);
  expect(text.stdout).toMatch(/^FAIL\s+nodes-up\s+1 of 3 UP nodes/m);
  expect(text.stdout.trimEnd().split("\n").at(-1)).toMatch(
    /^unhealthy: \d+ checks? failed \(.*nodes-up/,
  );
});

/** The files of a .tar.gz, by name. */
async function untar(file: string): Promise<{ entries: Map<string, Buffer>; tar: Buffer }> {
  const gz = readFileSync(file);
  const tar = await new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    Readable.from([gz])
      .pipe(createGunzip())
      .on("data", (c: Buffer) => chunks.push(c))
      .on("end", () => resolve(Buffer.concat(chunks)))
      .on("error", reject);
  });
  const entries = new Map<string, Buffer>();
  const ex = extract();
  const done = new Promise<void>((resolve, reject) => {
    ex.on("entry", (header, stream, next) => {
      const chunks: Buffer[] = [];
      stream.on("data", (c: unknown) => {
        if (Buffer.isBuffer(c)) chunks.push(c);
      });
      stream.on("end", () => {
        entries.set(header.name, Buffer.concat(chunks));
        next();
      });
      stream.resume();
    });
    ex.on("finish", resolve);
    ex.on("error", reject);
  });
  ex.end(tar);
  await done;
  return { entries, tar };
}

/** Every file under `dir` (no symlinks followed), with its stats. */
function walk(dir: string): { path: string; stats: Stats }[] {
  const found: { path: string; stats: Stats }[] = [];
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return found;
  }
  for (const name of names) {
    const path = join(dir, name);
    const stats = lstatSync(path, { throwIfNoEntry: false });
    if (stats === undefined) continue;
    if (stats.isDirectory()) found.push(...walk(path));
    else if (stats.isFile()) found.push({ path, stats });
  }
  return found;
}

/** A secret as the forms it could take in a text or binary file. */
function forms(secret: Buffer): Buffer[] {
  const b64 = secret.toString("base64");
  return [
    secret,
    Buffer.from(secret.toString("hex")),
    Buffer.from(secret.toString("hex").toUpperCase()),
    Buffer.from(b64),
    Buffer.from(b64.replace(/=+$/, "")),
    Buffer.from(secret.toString("base64url")),
    // A PEM body's first line (64 characters of the base64).
    ...(b64.length > 64 ? [Buffer.from(b64.slice(0, 64))] : []),
  ].filter((f) => f.length >= 16);
}

const pemKey = /-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----[\s\S]*?-----END \1PRIVATE KEY-----/g;

/** The private keys in PEM text `text`: each as its DER and, where it has one, its raw private part. */
function pemSecrets(text: string): { what: string; bytes: Buffer }[] {
  const found: { what: string; bytes: Buffer }[] = [];
  for (const [pem] of text.matchAll(pemKey)) {
    const body = pem.replace(/-----[^-]+-----/g, "").replace(/\s+/g, "");
    found.push({ what: "DER", bytes: Buffer.from(body, "base64") });
    try {
      const jwk = createPrivateKey(pem).export({ format: "jwk" });
      if (typeof jwk.d === "string")
        found.push({ what: "raw", bytes: Buffer.from(jwk.d, "base64url") });
    } catch {
      // Not a key node:crypto reads (e.g. encrypted): its DER is looked for all the same.
    }
  }
  return found;
}

it("support: the bundle made with a node down has every node's files, the down one's why, and no secret", async () => {
  const down = stopped;
  if (down === undefined) throw new Error("the previous test stopped no node");
  const file = join(e2e.dir, "support.tar.gz");
  const res = await e2e.cluster.metroctl(["support", "-o", file, "--node-timeout", "3"]);
  expect(res).toMatchObject({ exitCode: 0, stderr: "" });
  expect(res.stdout).toMatch(
    new RegExp(`^wrote ${file}: 3 nodes \\(not answering: ${down.id}\\), \\d+ files\\n$`),
  );
  expect(statSync(file).mode & 0o777).toBe(0o600);
  // Nothing else was left beside it (the temporary file was renamed).
  expect(readdirSync(e2e.dir).filter((n) => n.includes("support"))).toEqual(["support.tar.gz"]);

  const { entries, tar } = await untar(file);
  const names = [...entries.keys()];
  const root = names[0].split("/")[0];
  expect(root).toMatch(/^metropolis-support-\d{8}T\d{6}Z$/);
  const has = (name: string) => entries.has(`${root}/${name}`);
  const text = (name: string) => entries.get(`${root}/${name}`)?.toString("utf8") ?? "";
  for (const name of [
    "README.txt",
    "cluster/health.txt",
    "cluster/health.json",
    "cluster/members.txt",
    "cluster/members.json",
    "cluster/configuration.json",
    "cluster/versions.json",
    "cluster/nodes.json",
  ]) {
    expect([name, has(name)]).toEqual([name, true]);
  }
  const bundled: ClusterHealthView = JSON.parse(text("cluster/health.json"));
  expect(bundled.checks.find((c) => c.name === "nodes-up")).toMatchObject({
    verdict: "fail",
    nodeIds: [down.id],
  });
  const versions: { nodes: Record<string, string | null> } = JSON.parse(
    text("cluster/versions.json"),
  );
  expect(Object.keys(versions.nodes).sort()).toEqual(e2e.cluster.nodes.map((n) => n.id).sort());

  for (const node of e2e.cluster.nodes) {
    const dir = `nodes/${node.id}`;
    expect(text(`${dir}/describe.txt`)).toMatch(new RegExp(`^ID:\\s+${node.id}$`, "m"));
    expect(JSON.parse(text(`${dir}/describe.json`))).toMatchObject({ id: node.id });
    if (node === down) {
      expect(text(`${dir}/unreachable.txt`)).toMatch(
        new RegExp(
          `^node ${node.id} at \\S+ answered none of tree, reports, logs, metrics-core, metrics-node, metrics-etcd within 3 s each:`,
        ),
      );
      for (const item of ["tree", "reports", "logs", "metrics-core"]) {
        expect(text(`${dir}/${item}.error.txt`).length).toBeGreaterThan(0);
      }
      continue;
    }
    for (const name of [
      "tree.txt",
      "tree.json",
      "reports.txt",
      "logs.txt",
      "metrics-core.prom",
      "metrics-node.prom",
      "metrics-etcd.prom",
    ]) {
      expect([node.id, name, has(`${dir}/${name}`)]).toEqual([node.id, name, true]);
    }
    expect(has(`${dir}/unreachable.txt`)).toBe(false);
    expect(text(`${dir}/tree.txt`)).toMatch(/root/);
    const logLines = text(`${dir}/logs.txt`).trimEnd().split("\n");
    expect(logLines.length).toBeGreaterThan(0);
    expect(logLines.length).toBeLessThanOrEqual(1000);
    expect(text(`${dir}/reports.txt`)).toMatch(/ started /);
    expect(text(`${dir}/metrics-core.prom`)).toMatch(/^metropolis_supervisor_node_state\{/m);
    expect(text(`${dir}/metrics-etcd.prom`)).toMatch(/^etcd_server_has_leader 1$/m);
  }

  // The secrets: what the owner and the nodes hold on disk.
  const secrets: { what: string; bytes: Buffer }[] = [];
  const ownerKey = readFileSync(join(e2e.cluster.metroctlDir, "owner-key.pem"), "utf8");
  secrets.push(...pemSecrets(ownerKey).map((s) => ({ ...s, what: `owner key (${s.what})` })));
  for (const node of e2e.cluster.nodes) {
    for (const { path, stats } of walk(node.root)) {
      if (path.endsWith("machine.key")) {
        secrets.push({ what: `${path}`, bytes: readFileSync(path) });
        continue;
      }
      if (stats.size > 1024 * 1024) continue;
      let content: string;
      try {
        content = readFileSync(path, "latin1");
      } catch {
        continue;
      }
      if (!content.includes("PRIVATE KEY-----")) continue;
      secrets.push(...pemSecrets(content).map((s) => ({ ...s, what: `${path} (${s.what})` })));
    }
  }
  // At least the owner key (DER and raw) and each node's machine key.
  expect(secrets.length).toBeGreaterThanOrEqual(2 + e2e.cluster.nodes.length);
  const leaked: string[] = [];
  for (const secret of secrets) {
    for (const form of forms(secret.bytes)) {
      if (tar.includes(form))
        leaked.push(`${secret.what} as ${form.toString("latin1").slice(0, 24)}…`);
    }
  }
  expect(leaked).toEqual([]);
  expect(tar.includes(Buffer.from("PRIVATE KEY-----"))).toBe(false);
  console.log(
    `support bundle: ${entries.size} files, ${tar.length} bytes of tar; ${secrets.length} secrets looked for in ${secrets.reduce((n, s) => n + forms(s.bytes).length, 0)} forms`,
  );
});
