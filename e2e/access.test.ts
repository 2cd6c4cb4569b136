/**
 * e2e scoped access (issue 38 part 4): one real node and the owner's
 * metroctl. The owner issues a reader and an operator credential, each a
 * metroctl config dir of its own (`access issue … -o DIR`); the reader lists
 * nodes and reads a node's tree (the curator's Management and the node's
 * Debug service) but is refused an approve, a label and a reboot
 * (PERMISSION_DENIED naming its role and the method); the operator may set a
 * label; a backup credential takes a backup (sealed to the owner's key, which
 * opens it) and nothing else; the reader's observer (`metroctl observe`, which calls the cluster
 * with the credentials it was started with) passes on the cluster's refusal of
 * an approve and a label change; `access list` shows both; after `access revoke` the reader is
 * refused (UNAUTHENTICATED); a credential issued for a few seconds works,
 * then is refused once it has expired.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openBackupKeyring, readBackupFile } from "@metropolis/consensus";
import { ConfigDir, runMetroctl } from "@metropolis/metroctl";
import { eventually } from "@metropolis/supervisor/testing";
import { E2eCluster } from "./e2e-cluster";

jest.setTimeout(240_000);

let e2e: E2eCluster;
let dirs: string;

beforeAll(async () => {
  e2e = await E2eCluster.create("access", { nodes: 1 });
  await e2e.up();
  dirs = await mkdtemp(join(tmpdir(), "metropolis-access-"));
});

afterAll(async () => {
  await e2e?.teardown();
  if (dirs) await rm(dirs, { recursive: true, force: true });
});

/** Runs metroctl in-process with the config dir `dir` (a scoped credential's). */
async function as(
  dir: string,
  args: readonly string[],
): Promise<{ exitCode: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const exitCode = await runMetroctl(["--config", dir, ...args], {
    stdout: { write: (s: string) => (stdout += s) },
    stderr: { write: (s: string) => (stderr += s) },
  });
  return { exitCode, stdout, stderr };
}

/** `access issue` by the owner into a new dir under `dirs`; returns the dir. */
async function issue(role: string, name: string, ttl: string): Promise<string> {
  const dir = join(dirs, name);
  const out = await e2e.cluster.metroctlOk([
    "access",
    "issue",
    "--role",
    role,
    "--name",
    name,
    "--ttl",
    ttl,
    "-o",
    dir,
  ]);
  expect(out).toMatch(
    new RegExp(`^issued the ${role} credential "${name}" \\(serial [0-9a-f]+, expires `),
  );
  return dir;
}

describe("scoped access", () => {
  let reader: string;
  let operator: string;

  beforeAll(async () => {
    reader = await issue("reader", "rita", "24h");
    operator = await issue("operator", "otto", "24h");
  });

  it("the reader lists nodes and reads a node's tree", async () => {
    const node = e2e.node(1);
    const nodes = await as(reader, ["nodes", "-o", "json"]);
    expect(nodes).toMatchObject({ exitCode: 0, stderr: "" });
    expect(nodes.stdout).toContain(node.id);
    const tree = await as(reader, ["tree", node.id]);
    expect(tree).toMatchObject({ exitCode: 0, stderr: "" });
    expect(tree.stdout).toContain("root");
  });

  it("the reader is refused an approve, a label and a reboot, naming its role and the method", async () => {
    const id = e2e.node(1).id;
    const refusals: [string[], string][] = [
      [["approve", id], "Management.ApproveNode"],
      [["label", id, "team=ops"], "Management.UpdateNodeLabels"],
      // --force: past the quorum check (which a reader may make) to the node's own refusal.
      [["node", "reboot", id, "--force"], "NodeManagement.Reboot"],
    ];
    for (const [args, method] of refusals) {
      const res = await as(reader, args);
      expect({ args, exitCode: res.exitCode }).toEqual({ args, exitCode: 1 });
      expect(res.stderr).toContain("PERMISSION_DENIED");
      expect(res.stderr).toContain(`the reader role (credential "rita") may not call ${method}`);
    }
    // The node was not rebooted.
    expect(e2e.node(1).process?.running).toBe(true);
  });

  it("the operator may set a label", async () => {
    const id = e2e.node(1).id;
    const res = await as(operator, ["label", id, "team=ops"]);
    expect(res).toMatchObject({ exitCode: 0 });
    expect(JSON.parse(await e2e.cluster.metroctlOk(["nodes", "-o", "json"]))).toEqual([
      expect.objectContaining({ id, labels: expect.objectContaining({ team: "ops" }) }),
    ]);
    // But not what is the owner's alone.
    const refused = await as(operator, ["access", "list"]);
    expect(refused.exitCode).toBe(1);
    expect(refused.stderr).toContain("PERMISSION_DENIED");
  });

  it("a backup credential takes a backup, which only the owner's key opens, and nothing else", async () => {
    const backup = await issue("backup", "bea", "1h");
    const file = join(dirs, "cluster.backup");
    const taken = await as(backup, ["cluster", "backup", "-o", file]);
    expect(taken).toMatchObject({ exitCode: 0 });
    expect(taken.stdout).toContain("not this backup credential's");
    const ownerKey = await new ConfigDir(e2e.cluster.metroctlDir).readOwnerKey();
    if (!ownerKey) throw new Error("the owner's config dir has no key");
    const backupFile = await readBackupFile(file);
    expect(() => openBackupKeyring(backupFile, ownerKey.privateKey)).not.toThrow();
    const refused = await as(backup, ["nodes"]);
    expect(refused.exitCode).toBe(1);
    expect(refused.stderr).toContain(
      'the backup role (credential "bea") may not call Management.GetNodes',
    );
    const readerBackup = await as(reader, ["cluster", "backup", "-o", join(dirs, "r.backup")]);
    expect(readerBackup.exitCode).toBe(1);
    expect(readerBackup.stderr).toContain("PERMISSION_DENIED");
  });

  it("the reader's observer can change nothing: the cluster refuses its calls", async () => {
    const stop = new AbortController();
    let stdout = "";
    let stderr = "";
    const exit = runMetroctl(["--config", reader, "observe", "--port", "0"], {
      stdout: { write: (s: string) => (stdout += s) },
      stderr: { write: (s: string) => (stderr += s) },
      signal: stop.signal,
    });
    try {
      const printed = await eventually(
        () => /^http:\/\/(127\.0\.0\.1:\d+)\/#token=([0-9a-f]{64})$/m.exec(stdout) ?? undefined,
        "the observer's URL",
      );
      const [, host, token] = printed;
      const id = e2e.node(1).id;
      const post = async (action: string, body: unknown) => {
        const res = await fetch(`http://${host}/api/nodes/${id}/${action}`, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            origin: `http://${host}`,
            "x-observer-token": token,
          },
          body: JSON.stringify(body),
        });
        return { status: res.status, body: await res.text() };
      };
      const attempts: [string, unknown, string][] = [
        ["approve", {}, "Management.ApproveNode"],
        ["labels", { changes: ["team=observer"] }, "Management.UpdateNodeLabels"],
        ["roles", { worker: true }, "Management.UpdateNodeRoles"],
      ];
      for (const [action, body, method] of attempts) {
        const answer = await post(action, body);
        expect({ action, status: answer.status }).toEqual({ action, status: 422 });
        expect(answer.body).toContain("PERMISSION_DENIED");
        expect(answer.body).toContain(method);
      }
      expect(await e2e.cluster.metroctlOk(["nodes", "-o", "json"])).not.toContain("observer");
    } catch (e) {
      throw new Error(`the reader's observer: ${String(e)}; its stderr: ${stderr}`, { cause: e });
    } finally {
      stop.abort();
      await exit;
    }
  });

  it("access list shows the credentials; after access revoke the reader is refused", async () => {
    expect(JSON.parse(await e2e.cluster.metroctlOk(["access", "list", "-o", "json"]))).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ name: "rita", role: "reader", status: "active" }),
        expect.objectContaining({ name: "otto", role: "operator", status: "active" }),
      ]),
    );
    const revoked = await e2e.cluster.metroctlOk(["access", "revoke", "rita"]);
    expect(revoked).toMatch(/^revoked the reader credential "rita" \(serial [0-9a-f]+\)/);
    const refused = await as(reader, ["nodes"]);
    expect(refused.exitCode).toBe(1);
    expect(refused.stderr).toContain("UNAUTHENTICATED");
    expect(refused.stderr).toContain("revoked");
    // The node learns the revocation through its CRL watch.
    const id = e2e.node(1).id;
    await eventually(
      async () => (await as(reader, ["tree", id])).stderr.includes("UNAUTHENTICATED"),
      "the node to refuse the revoked reader",
      { timeoutMs: 20_000 },
    );
    expect(JSON.parse(await e2e.cluster.metroctlOk(["access", "list", "-o", "json"]))).toEqual(
      expect.arrayContaining([expect.objectContaining({ name: "rita", status: "revoked" })]),
    );
    // The operator is untouched.
    expect((await as(operator, ["nodes"])).exitCode).toBe(0);
  });

  it("a credential issued for a few seconds works, and is refused once expired", async () => {
    const brief = await issue("reader", "brief", "6s");
    expect((await as(brief, ["nodes"])).exitCode).toBe(0);
    let last = "";
    await eventually(
      async () => {
        const res = await as(brief, ["nodes"]);
        last = res.stderr;
        return res.exitCode === 1 && res.stderr.includes("UNAUTHENTICATED");
      },
      "the curator to refuse the expired credential",
      { timeoutMs: 30_000 },
    );
    expect(last).toContain("expired");
  });
});
