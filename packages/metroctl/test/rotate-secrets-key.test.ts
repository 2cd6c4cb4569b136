/**
 * `metroctl rotate-secrets-key` against a real curator leader (real etcd,
 * real mTLS): what it prints, in text and JSON, and that the rotation really
 * happened (every sealed value in etcd names the new key).
 */
import { sealedKeyUsage } from "@metropolis/consensus";
import { metroctl, clusterPerFile, type MetroctlCluster } from "./cluster-fixture";

let cluster: MetroctlCluster;
let config: string;

clusterPerFile((c, dir) => ((cluster = c), (config = dir)));

describe("rotate-secrets-key", () => {
  it("rotates, says which key seals now and which were retired, and reseals everything", async () => {
    const root = cluster.leader.member.status.client.kv;
    const sealed = [...(await sealedKeyUsage(root)).values()].reduce((a, b) => a + b, 0);
    expect(sealed).toBeGreaterThan(0);

    const text = await metroctl(config, ["rotate-secrets-key"]);
    expect(text.stderr).toBe("");
    expect(text.code).toBe(0);
    expect(text.stdout).toBe(
      `cluster secrets key rotated: key 2 seals every secret (${sealed} re-sealed); retired: 1\n`,
    );
    expect(await sealedKeyUsage(root)).toEqual(new Map([[2, sealed]]));

    const json = await metroctl(config, ["rotate-secrets-key", "-o", "json"]);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual({ keyId: 3, retiredKeyIds: [2], resealed: sealed });
    expect(await sealedKeyUsage(root)).toEqual(new Map([[3, sealed]]));
  });

  it("is listed in the help", async () => {
    const help = await metroctl(config, ["--help"]);
    expect(help.stdout).toMatch(/rotate-secrets-key \[options\]\s+rotate the key that seals/);
  });
});
