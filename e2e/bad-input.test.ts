/**
 * e2e bad input: a node given input it cannot enrol with must stop at once
 * with one clear, boxed error on stderr and a non-zero exit — the "trapdoor"
 * an operator sees on the console — and must not disturb the cluster it
 * tried to join. Each case is a real `metropolis-node` process against a
 * real one-node cluster: a wrong register ticket, a forged CA, a corrupt
 * sealed configuration, garbage node parameters, and a bad config file.
 */
import { randomBytes } from "node:crypto";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { NodeView } from "@metropolis/metroctl";
import { CertificateAuthority } from "@metropolis/pki";
import { api } from "@metropolis/proto";
import type { NodeExit } from "../local-cluster/src/node-process";
import { E2eCluster, unboxed } from "./e2e-cluster";

jest.setTimeout(120_000);

let e2e: E2eCluster;
let register: api.NodeParameters_ClusterRegister;
let baseline: NodeView[];

beforeAll(async () => {
  e2e = await E2eCluster.create("bad-input", { nodes: 1 });
  await e2e.up();
  const path = join(e2e.dir, "register.pb");
  await e2e.cluster.metroctlOk(["register-params", "-o", path]);
  const params = api.NodeParameters.decode(await readFile(path));
  if (params.cluster?.$case !== "clusterRegister") throw new Error("no register parameters");
  register = params.cluster.clusterRegister;
  baseline = await e2e.cluster.listNodes();
});

afterAll(async () => {
  await e2e?.teardown();
});

/** What a node of a run tried with. */
interface Attempt {
  name: string;
  /** Node parameters file contents; none when undefined. */
  parameters?: Uint8Array;
  /** Prepares the node's root before it starts. */
  prepare?: (root: string) => Promise<void>;
  /** Config file contents; default the cluster's node config. */
  config?: string;
}

/** Runs a node with `attempt` until it exits; resolves to its exit and stderr. */
async function run(attempt: Attempt): Promise<{ exit: NodeExit; stderr: string; root: string }> {
  const root = join(e2e.dir, attempt.name);
  await mkdir(root, { recursive: true });
  await attempt.prepare?.(root);
  let parametersPath: string | undefined;
  if (attempt.parameters) {
    parametersPath = join(e2e.dir, `${attempt.name}.pb`);
    await writeFile(parametersPath, attempt.parameters);
  }
  let configPath = e2e.cluster.nodeConfigPath;
  if (attempt.config !== undefined) {
    configPath = join(e2e.dir, `${attempt.name}.json`);
    await writeFile(configPath, attempt.config);
  }
  const started = performance.now();
  const proc = await e2e.spawn({
    name: attempt.name,
    root,
    parametersPath,
    configPath,
  });
  const exit = await Promise.race([
    proc.exited,
    new Promise<never>((_, reject) => {
      void proc
        .waitForLog(() => false, 60_000, { what: "its exit" })
        .catch((e: unknown) => (proc.running ? reject(e) : undefined));
    }),
  ]);
  e2e.note(`${attempt.name}: exit ${exit.code} after`, performance.now() - started);
  return { exit, stderr: proc.stderr(), root };
}

function withRegister(changes: Partial<api.NodeParameters_ClusterRegister>): Uint8Array {
  return api.NodeParameters.encode({
    cluster: { $case: "clusterRegister", clusterRegister: { ...register, ...changes } },
  }).finish();
}

/** `text` without whitespace: the box wraps long words (paths) anywhere. */
const squash = (text: string) => text.replace(/\s+/g, "");

async function expectClusterUntouched(): Promise<void> {
  const now = await e2e.cluster.listNodes();
  const shape = (views: NodeView[]) => views.map((v) => [v.id, v.state, v.roles, v.address]);
  expect(shape(now)).toEqual(shape(baseline));
  expect(now[0].health).toBe("HEALTHY");
}

describe("bad input: a node refuses to start, clearly, and leaves the cluster alone", () => {
  it("a wrong register ticket", async () => {
    const { exit, stderr, root } = await run({
      name: "wrong-ticket",
      parameters: withRegister({ registerTicket: Buffer.alloc(32, 7) }),
    });
    expect(exit).toEqual({ code: 1, signal: null });
    expect(stderr).toContain("metropolis-node cannot start");
    expect(unboxed(stderr)).toMatch(/enrolment into the cluster failed/);
    expect(unboxed(stderr)).toMatch(/RegisterNode: the cluster refused: PERMISSION_DENIED/);
    await expect(
      readFile(join(root, "esp", "metropolis", "sealed_configuration.pb")),
    ).rejects.toThrow(/ENOENT/);
    await expectClusterUntouched();
  });

  it("a forged CA certificate", async () => {
    const forged = await CertificateAuthority.create();
    const { exit, stderr } = await run({
      name: "forged-ca",
      parameters: withRegister({ caCertificate: forged.certificate.der }),
    });
    expect(exit).toEqual({ code: 1, signal: null });
    expect(stderr).toContain("metropolis-node cannot start");
    expect(unboxed(stderr)).toMatch(/CA certificate is wrong or forged/);
    await expectClusterUntouched();
  });

  it("a corrupt sealed configuration, which it keeps", async () => {
    const garbage = "not a sealed configuration";
    const sealed = (root: string) => join(root, "esp", "metropolis", "sealed_configuration.pb");
    const { exit, stderr, root } = await run({
      name: "corrupt-sealed",
      // Register parameters too: a node that belongs to a cluster must not register afresh.
      parameters: withRegister({}),
      prepare: async (root) => {
        await mkdir(join(root, "esp", "metropolis"), { recursive: true });
        await writeFile(sealed(root), garbage);
      },
    });
    expect(exit).toEqual({ code: 1, signal: null });
    expect(stderr).toContain("metropolis-node cannot start");
    // The box breaks a path too long for a line: compare without whitespace.
    expect(squash(unboxed(stderr))).toContain(squash(sealed(root)));
    expect(await readFile(sealed(root), "utf8")).toBe(garbage);
    await expectClusterUntouched();
  });

  it("garbage node parameters", async () => {
    const { exit, stderr, root } = await run({
      name: "garbage-params",
      parameters: randomBytes(64),
    });
    expect(exit).toEqual({ code: 1, signal: null });
    expect(stderr).toContain("metropolis-node cannot start");
    const where = join(root, "esp", "metropolis", "parameters.pb");
    expect(squash(unboxed(stderr))).toContain(
      squash(`NodeParametersError: node parameters in ${where}: not a NodeParameters message`),
    );
    await expectClusterUntouched();
  });

  it("a config file with an unknown field (exit 2, before anything starts)", async () => {
    const { exit, stderr, root } = await run({
      name: "bad-config",
      parameters: withRegister({}),
      config: JSON.stringify({ loopbackTimings: true, heartbeatTimeoutMS: 4000 }),
    });
    expect(exit).toEqual({ code: 2, signal: null });
    expect(stderr).toMatch(/unknown field "heartbeatTimeoutMS"/);
    await expect(readFile(join(root, "esp", "metropolis", "parameters.pb"))).rejects.toThrow(
      /ENOENT/,
    );
    await expectClusterUntouched();
  });
});
