/**
 * bootstrap-params and takeownership: the owner key metroctl creates is the
 * one the bootstrap parameters name, and takeownership turns the cluster's
 * owner key into an owner certificate the Management API accepts — learning
 * the CA on first use, or refusing when a pinned CA does not match.
 */
import { createHash } from "node:crypto";
import { readFile, stat, writeFile } from "node:fs/promises";
import { createServer, connect, type Socket } from "node:net";
import { join } from "node:path";
import { api } from "@metropolis/proto";
import { generateKeyPair, parseCertificate, publicKeyFromPrivateKey } from "@metropolis/pki";
import { ConfigDir } from "../src";
import { metroctl, startCluster, tempDir, type MetroctlCluster } from "./cluster-fixture";

let cluster: MetroctlCluster;

beforeAll(async () => {
  cluster = await startCluster();
}, 30_000);

afterAll(async () => {
  await cluster?.stop();
});

const oneErrorLine = (stderr: string) => {
  const lines = stderr.split("\n").filter((l) => l !== "");
  expect(lines).toHaveLength(1);
  return lines[0];
};

/** A config dir holding the fixture cluster's owner key (what bootstrap-params would have made). */
async function withOwnerKey(privateKey: Uint8Array): Promise<string> {
  const dir = await tempDir("owner");
  await new ConfigDir(dir).writeOwnerKey(privateKey);
  return dir;
}

describe("bootstrap-params", () => {
  it("creates the owner key and writes NodeParameters naming it", async () => {
    const dir = await tempDir("bootstrap");
    const config = join(dir, "config");
    const out = join(dir, "params.pb");
    const res = await metroctl(config, ["bootstrap-params", "-o", out, "--label", "rack=r1"]);
    expect(res.code).toBe(0);
    expect(res.stderr).toContain("created the owner key");

    const key = await new ConfigDir(config).readOwnerKey();
    expect(key).toBeDefined();
    const params = api.NodeParameters.decode(await readFile(out));
    expect(params.cluster).toEqual({
      $case: "clusterBootstrap",
      clusterBootstrap: { ownerPublicKey: key!.publicKey, labels: new Map([["rack", "r1"]]) },
    });
    // The key is secret: only its owner may read it, and the dir holding it is private.
    expect((await stat(join(config, "owner-key.pem"))).mode & 0o777).toBe(0o600);
    expect((await stat(config)).mode & 0o777).toBe(0o700);
  });

  it("reuses an existing owner key", async () => {
    const dir = await tempDir("reuse");
    const keyFile = join(dir, "owner-key.pem");
    expect((await metroctl(dir, ["bootstrap-params", "-o", join(dir, "a.pb")])).code).toBe(0);
    const before = await readFile(keyFile, "utf8");
    const again = await metroctl(dir, ["bootstrap-params", "-o", join(dir, "b.pb")]);
    expect(again.code).toBe(0);
    expect(again.stderr).toContain("using the owner key");
    expect(await readFile(keyFile, "utf8")).toBe(before);
    const a = api.NodeParameters.decode(await readFile(join(dir, "a.pb")));
    const b = api.NodeParameters.decode(await readFile(join(dir, "b.pb")));
    expect(a).toEqual(b);
  });

  it("refuses a corrupt owner key, naming the file, and leaves it alone", async () => {
    const dir = await tempDir("corrupt");
    const keyFile = join(dir, "owner-key.pem");
    await writeFile(keyFile, "not a key\n");
    const res = await metroctl(dir, ["bootstrap-params", "-o", join(dir, "p.pb")]);
    expect(res.code).toBe(1);
    expect(oneErrorLine(res.stderr)).toMatch(
      new RegExp(`^metroctl: bootstrap-params: ${keyFile}: not an Ed25519 private key: `),
    );
    expect(await readFile(keyFile, "utf8")).toBe("not a key\n");
  });
});

describe("takeownership", () => {
  it("stores an owner certificate that the Management API accepts", async () => {
    const { leader } = cluster;
    const config = await withOwnerKey(leader.owner.privateKey);
    const res = await metroctl(config, ["--endpoints", leader.address, "takeownership"]);
    expect(res.code).toBe(0);
    const fingerprint = createHash("sha256").update(leader.caCertificate).digest("hex");
    expect(res.stderr).toContain(`trusting cluster CA sha256:${fingerprint}`);

    const stored = new ConfigDir(config);
    expect((await stored.readCaCertificate())?.der.equals(leader.caCertificate)).toBe(true);
    const owner = parseCertificate(await readFile(join(config, "owner.pem"), "utf8"));
    expect(owner.commonName).toBe("owner");
    expect(owner.publicKey.equals(leader.owner.publicKey)).toBe(true);

    // The stored certificate, used outside metroctl, is accepted as the owner's.
    const credentials = await stored.readOwnerCredentials();
    const management = await leader.client(api.ManagementClient, {
      tls: { cert: credentials!.cert, key: credentials!.key },
    });
    const nodes = await new Promise<api.Node[]>((resolve, reject) =>
      management.getNodes({ states: [], roles: [], labels: new Map() }, (err, r) =>
        err ? reject(err) : resolve(r.nodes),
      ),
    );
    expect(nodes.map((n) => n.id)).toContain(leader.firstNode.nodeId);

    // And metroctl itself uses it, with the endpoint it remembered.
    const listed = await metroctl(config, ["nodes", "-o", "json"]);
    expect(listed.code).toBe(0);
    expect(JSON.parse(listed.stdout)).toContainEqual(
      expect.objectContaining({ id: leader.firstNode.nodeId, state: "UP" }),
    );
  });

  it("waits within --dial-timeout for a node that does not listen yet, as one just started", async () => {
    const { leader } = cluster;
    const config = await withOwnerKey(leader.owner.privateKey);
    // A port nobody listens on, where the node "starts" (a proxy to the fixture's curator) later.
    const port = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, "127.0.0.1", () => {
        const address = probe.address();
        probe.close(() => resolve(typeof address === "object" && address ? address.port : 0));
      });
    });
    const [host, upstreamPort] = leader.address.split(":");
    const sockets = new Set<Socket>();
    const proxy = createServer((down) => {
      const up = connect(Number(upstreamPort), host);
      for (const socket of [down, up]) {
        sockets.add(socket);
        socket.on("close", () => sockets.delete(socket));
      }
      down.pipe(up).pipe(down);
      down.on("error", () => up.destroy());
      up.on("error", () => down.destroy());
    });
    const started = metroctl(config, [
      "--endpoints",
      `127.0.0.1:${port}`,
      "--dial-timeout",
      "20",
      "takeownership",
    ]);
    // The node comes up a moment after the operator ran takeownership (the scenario, not a wait).
    const late = setTimeout(() => proxy.listen(port, "127.0.0.1"), 1500);
    try {
      const res = await started;
      expect(res.stderr).toContain("trusting cluster CA");
      expect(res.code).toBe(0);
      await expect(new ConfigDir(config).readOwnerCredentials()).resolves.toBeDefined();
    } finally {
      clearTimeout(late);
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
    }
  });

  it("accepts a CA that matches --ca-sha256", async () => {
    const { leader } = cluster;
    const config = await withOwnerKey(leader.owner.privateKey);
    const fingerprint = createHash("sha256").update(leader.caCertificate).digest("hex");
    const res = await metroctl(config, [
      "--endpoints",
      leader.address,
      "takeownership",
      "--ca-sha256",
      // As openssl prints it.
      "SHA256:" + fingerprint.toUpperCase().replace(/(..)(?!$)/g, "$1:"),
    ]);
    expect(res.code).toBe(0);
    expect(res.stderr).toContain("matches --ca-sha256");
  });

  it("refuses a CA that does not match --ca-sha256, storing nothing", async () => {
    const { leader } = cluster;
    const config = await withOwnerKey(leader.owner.privateKey);
    const res = await metroctl(config, [
      "--endpoints",
      leader.address,
      "takeownership",
      "--ca-sha256",
      "00".repeat(32),
    ]);
    expect(res.code).toBe(1);
    expect(oneErrorLine(res.stderr)).toMatch(
      /^metroctl: takeownership: 127\.0\.0\.1:\d+ presented CA sha256:[0-9a-f]{64}, not the pinned sha256:0{64}$/,
    );
    expect(await new ConfigDir(config).readCaCertificate()).toBeUndefined();
  });

  it("is refused for a key that is not the cluster owner's", async () => {
    const { leader } = cluster;
    const stranger = generateKeyPair();
    const config = await withOwnerKey(stranger.privateKey);
    const res = await metroctl(config, ["--endpoints", leader.address, "takeownership"]);
    expect(res.code).toBe(1);
    expect(oneErrorLine(res.stderr.split("\n").slice(1).join("\n"))).toBe(
      "metroctl: takeownership: PERMISSION_DENIED: this key is not the cluster owner's",
    );
    expect(await new ConfigDir(config).readOwnerCredentials()).toBeUndefined();
  });

  it("needs an owner key", async () => {
    const config = await tempDir("nokey");
    const res = await metroctl(config, ["--endpoints", cluster.endpoint, "takeownership"]);
    expect(res.code).toBe(1);
    expect(oneErrorLine(res.stderr)).toBe(
      `metroctl: takeownership: ${join(config, "owner-key.pem")}: no owner key: run \`metroctl bootstrap-params\` first (it creates the key the cluster is bootstrapped with)`,
    );
  });

  it("is needed before Management commands", async () => {
    const config = await withOwnerKey(cluster.leader.owner.privateKey);
    const res = await metroctl(config, ["--endpoints", cluster.endpoint, "nodes"]);
    expect(res.code).toBe(1);
    expect(oneErrorLine(res.stderr)).toBe(
      `metroctl: nodes: ${join(config, "owner.pem")}: no owner certificate: run \`metroctl takeownership\` first`,
    );
  });

  it("reports a corrupt owner certificate naming the file", async () => {
    const { leader } = cluster;
    const config = await withOwnerKey(leader.owner.privateKey);
    expect((await metroctl(config, ["--endpoints", leader.address, "takeownership"])).code).toBe(0);
    const certFile = join(config, "owner.pem");
    await writeFile(certFile, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n");
    const res = await metroctl(config, ["nodes"]);
    expect(res.code).toBe(1);
    expect(oneErrorLine(res.stderr)).toMatch(
      new RegExp(`^metroctl: nodes: ${certFile}: not a certificate: `),
    );
  });

  it("reports an owner certificate that is not the key's", async () => {
    const { leader } = cluster;
    const config = await withOwnerKey(leader.owner.privateKey);
    expect((await metroctl(config, ["--endpoints", leader.address, "takeownership"])).code).toBe(0);
    const other = generateKeyPair();
    await new ConfigDir(config).writeOwnerKey(other.privateKey);
    expect(publicKeyFromPrivateKey(other.privateKey).equals(leader.owner.publicKey)).toBe(false);
    const res = await metroctl(config, ["nodes"]);
    expect(res.code).toBe(1);
    expect(oneErrorLine(res.stderr)).toMatch(
      new RegExp(
        `^metroctl: nodes: ${join(config, "owner.pem")}: does not belong to owner-key.pem`,
      ),
    );
  });
});
