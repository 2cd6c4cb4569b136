import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BinaryWriter } from "@bufbuild/protobuf/wire";
import { NodeParametersError } from "../src/errors";
import { parseNodeParameters, readNodeParameters } from "../src/node-parameters";
import { placeNodeRoot } from "@metropolis/localstorage";
import { CertificateAuthority, generateKeyPair } from "@metropolis/pki";
import { api } from "@metropolis/proto";
import winston from "winston";
import Transport from "winston-transport";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "cluster-params-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const encode = (p: api.NodeParameters) => Buffer.from(api.NodeParameters.encode(p).finish());
const bootstrap = (
  ownerPublicKey: Uint8Array = generateKeyPair().publicKey,
): api.NodeParameters => ({
  cluster: {
    $case: "clusterBootstrap",
    clusterBootstrap: { ownerPublicKey: Buffer.from(ownerPublicKey), labels: new Map() },
  },
});
async function register(
  over: Partial<api.NodeParameters_ClusterRegister> = {},
): Promise<api.NodeParameters> {
  const ca = await CertificateAuthority.create();
  return {
    cluster: {
      $case: "clusterRegister",
      clusterRegister: {
        registerTicket: Buffer.alloc(32, 1),
        clusterDirectory: {
          nodes: [
            {
              id: "n",
              publicKey: Buffer.alloc(32),
              addresses: [{ host: "127.0.0.2" }],
              consensusMember: true,
            },
          ],
        },
        caCertificate: ca.certificate.der,
        labels: new Map(),
        ...over,
      },
    },
  };
}

describe("parseNodeParameters", () => {
  it("accepts a bootstrap and a register", async () => {
    expect((await parseNodeParameters(encode(bootstrap()), "p")).kind).toBe("bootstrap");
    expect((await parseNodeParameters(encode(await register()), "p")).kind).toBe("register");
  });

  it.each<[string, () => Promise<Uint8Array>, RegExp]>([
    ["empty", async () => Buffer.alloc(0), /the file is empty/],
    [
      "garbage",
      async () => Buffer.from([0x0a, 0xff, 0xff, 0xff, 0x0f]),
      /not a NodeParameters message/,
    ],
    [
      "neither",
      // Only an unknown field 5, so that the file is not simply empty.
      async () =>
        new BinaryWriter()
          .uint32((5 << 3) | 0)
          .uint32(1)
          .finish(),
      /neither cluster_bootstrap nor cluster_register/,
    ],
    [
      "both",
      async () => {
        const w = new BinaryWriter();
        api.NodeParameters_ClusterBootstrap.encode(
          { ownerPublicKey: Buffer.alloc(32), labels: new Map() },
          w.uint32(10).fork(),
        ).join();
        const r = (await register()).cluster;
        if (r?.$case === "clusterRegister")
          api.NodeParameters_ClusterRegister.encode(r.clusterRegister, w.uint32(18).fork()).join();
        return w.finish();
      },
      /both cluster_bootstrap and cluster_register are set/,
    ],
    [
      "short owner key",
      async () => encode(bootstrap(Buffer.alloc(31))),
      /owner_public_key must be a 32-byte/,
    ],
    [
      "malformed ticket",
      async () => encode(await register({ registerTicket: Buffer.alloc(5) })),
      /register_ticket must be 32 bytes, got 5/,
    ],
    [
      "empty directory",
      async () => encode(await register({ clusterDirectory: { nodes: [] } })),
      /lists no node with an address/,
    ],
    [
      "forged CA",
      async () => encode(await register({ caCertificate: Buffer.from("not a certificate") })),
      /ca_certificate is not a valid/,
    ],
  ])("refuses %s parameters, naming the problem and the source", async (_what, bytes, message) => {
    const err = await parseNodeParameters(await bytes(), "/esp/parameters.pb").catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(NodeParametersError);
    expect(String(err)).toMatch(message);
    expect(String(err)).toContain("/esp/parameters.pb");
  });

  it.each(["__proto__", "example.com/__proto__"])(
    "refuses a label key %s, naming it, in bootstrap and register parameters",
    async (key) => {
      const labels = new Map([[key, "x"]]);
      const withLabels = bootstrap();
      if (withLabels.cluster?.$case === "clusterBootstrap")
        withLabels.cluster.clusterBootstrap.labels = labels;
      for (const params of [withLabels, await register({ labels })]) {
        const err = await parseNodeParameters(encode(params), "p").catch((e: unknown) => e);
        expect(err).toBeInstanceOf(NodeParametersError);
        expect(String(err)).toMatch(/node parameters in p: labels: /);
        expect(String(err)).toContain(JSON.stringify(key));
      }
    },
  );

  it("keeps the label keys constructor and prototype", async () => {
    const labels = new Map([
      ["constructor", "c"],
      ["prototype", "p"],
    ]);
    const parsed = await parseNodeParameters(encode(await register({ labels })), "p");
    expect(parsed.kind === "register" && parsed.register.labels).toEqual(labels);
  });

  it("refuses a leaf certificate as the CA", async () => {
    const ca = await CertificateAuthority.create();
    const leaf = await ca.issueNodeCertificate(generateKeyPair().publicKey);
    await expect(
      parseNodeParameters(encode(await register({ caCertificate: leaf.der })), "p"),
    ).rejects.toThrow(/ca_certificate is not a valid self-signed CA certificate/);
  });
});

describe("readNodeParameters", () => {
  const warnings: string[] = [];
  class Sink extends Transport {
    override log(info: winston.Logform.TransformableInfo, next: () => void) {
      if (info.level === "warn") warnings.push(String(info.message));
      next();
    }
  }
  const logger = winston.createLogger({ transports: [new Sink()] });

  it("reads the ESP copy, or the command line file, which wins with a warning", async () => {
    const root = placeNodeRoot(dir);
    await root.esp.mkdirAll();
    await root.esp.metropolis.parameters.write(bootstrap());
    expect((await readNodeParameters(root.esp.metropolis.parameters, undefined, logger)).kind).toBe(
      "bootstrap",
    );

    const cli = join(dir, "register.pb");
    await writeFile(cli, encode(await register()));
    expect((await readNodeParameters(root.esp.metropolis.parameters, cli, logger)).kind).toBe(
      "register",
    );
    expect(warnings.some((w) => w.includes(`using ${cli}`))).toBe(true);
  });

  it("names what is missing", async () => {
    const root = placeNodeRoot(dir);
    await expect(
      readNodeParameters(root.esp.metropolis.parameters, undefined, logger),
    ).rejects.toThrow(
      /no node parameters: neither .*parameters\.pb exists nor was a parameters file given/,
    );
    await expect(
      readNodeParameters(root.esp.metropolis.parameters, join(dir, "nope.pb"), logger),
    ).rejects.toThrow(/cannot read node parameters from .*nope\.pb/);
  });
});
