/**
 * `metroctl access`: what the commands check before they reach the cluster
 * (TTL, role, name, an existing key in the target dir), and how a
 * credential's record is shown. The calls themselves run in e2e/access.test.ts
 * against a real cluster.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { generateKeyPair } from "@metropolis/pki";
import { access } from "@metropolis/proto";
import { accessView, parseTtl } from "../src/access-commands";
import { ConfigDir } from "../src/config-dir";
import { runMetroctl } from "../src/run-metroctl";

/** Runs metroctl in-process; nothing here reaches a cluster. */
async function metroctl(args: readonly string[]) {
  let stdout = "";
  let stderr = "";
  const exitCode = await runMetroctl(args, {
    stdout: { write: (s: string) => (stdout += s) },
    stderr: { write: (s: string) => (stderr += s) },
  });
  return { exitCode, stdout, stderr };
}

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "metroctl-access-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

it("takes a TTL in seconds, minutes, hours or days, from 1 s to 366 days", () => {
  expect(parseTtl("30s")).toBe(30);
  expect(parseTtl("15m")).toBe(900);
  expect(parseTtl("24h")).toBe(86_400);
  expect(parseTtl("7d")).toBe(604_800);
  expect(parseTtl("90")).toBe(90);
  expect(parseTtl("366d")).toBe(366 * 86_400);
  for (const bad of ["0s", "367d", "-1h", "1.5h", "1w", "", "h", "9".repeat(30)]) {
    expect(() => parseTtl(bad)).toThrow(/--ttl: .* is not a duration from 1s to 366d/);
  }
});

it("refuses a bad role, name or TTL, or a target dir that holds a key, before reaching a cluster", async () => {
  const issue = (role: string, name: string, ttl: string, out = join(dir, "new")) =>
    metroctl([
      "--config",
      join(dir, "owner"),
      "--endpoints",
      "127.0.0.1:1",
      "access",
      "issue",
      "--role",
      role,
      "--name",
      name,
      "--ttl",
      ttl,
      "-o",
      out,
    ]);
  const badRole = await issue("admin", "alice", "1h");
  expect(badRole.exitCode).not.toBe(0);
  expect(badRole.stderr).toContain('--role: "admin" is not one of reader, operator, backup');
  for (const name of ["owner", "metropolis-1234", "Alice", "-alice", "a".repeat(49), "a b"]) {
    const res = await issue("reader", name, "1h");
    expect({ name, exitCode: res.exitCode }).toEqual({ name, exitCode: 1 });
    expect(res.stderr).toContain("--name:");
  }
  const badTtl = await issue("reader", "alice", "forever");
  expect(badTtl.stderr).toContain("--ttl:");
  const taken = join(dir, "taken");
  await new ConfigDir(taken).writeOwnerKey(generateKeyPair().privateKey);
  const existing = await issue("reader", "alice", "1h", taken);
  expect(existing.exitCode).not.toBe(0);
  expect(existing.stderr).toContain("exists already");
});

it("shows a credential's role and status: active, expired, revoked", () => {
  const now = Date.parse("2026-12-01T12:00:00Z");
  const credential: access.AccessCredential = {
    name: "alice",
    role: access.AccessRole.OPERATOR,
    serial: "abc123",
    publicKey: Buffer.alloc(32),
    issuedAt: new Date(now - 3600_000),
    notAfter: new Date(now + 3600_000),
    revokedAt: undefined,
  };
  expect(accessView(credential, now)).toEqual({
    name: "alice",
    role: "operator",
    serial: "abc123",
    issuedAt: "2026-12-01T11:00:00.000Z",
    expiresAt: "2026-12-01T13:00:00.000Z",
    status: "active",
  });
  expect(accessView(credential, now + 2 * 3600_000).status).toBe("expired");
  expect(accessView({ ...credential, revokedAt: new Date(now) }, now).status).toBe("revoked");
});
