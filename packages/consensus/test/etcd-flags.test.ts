import { etcdArgs, localTimings } from "../src/etcd-flags";

describe("etcd flags", () => {
  const base = {
    name: "metropolis-abc",
    dataDir: "/d/data/etcd/data",
    peerUrl: "https://127.0.0.2:7834",
    clientSocket: "client.sock:0",
    peerTls: { caFile: "/e/ca.pem", certFile: "/e/cert.pem", keyFile: "/e/key.pem" },
    initialCluster: [
      { name: "metropolis-abc", peerUrl: "https://127.0.0.2:7834" },
      { name: "metropolis-def", peerUrl: "https://127.0.0.3:7834" },
    ],
    clusterState: "existing" as const,
  };

  it("serve clients on a private socket and peers over mutual TLS", () => {
    const args = etcdArgs(base);
    expect(args).toEqual(
      expect.arrayContaining([
        "--listen-client-urls=unix://client.sock:0",
        "--peer-client-cert-auth=true",
        "--peer-trusted-ca-file=/e/ca.pem",
        "--initial-cluster=metropolis-abc=https://127.0.0.2:7834,metropolis-def=https://127.0.0.3:7834",
        "--initial-cluster-state=existing",
        // A member cut off must not come back at a raised term (see etcd-flags.ts).
        "--pre-vote=true",
      ]),
    );
    expect(args.some((a) => a.startsWith("--heartbeat-interval"))).toBe(false);
    expect(args.some((a) => a.startsWith("--peer-crl-file"))).toBe(false);
  });

  it("take tight timings and a CRL when asked", () => {
    const args = etcdArgs({
      ...base,
      timings: localTimings,
      peerTls: { ...base.peerTls, crlFile: "/e/crl.pem" },
    });
    expect(args).toEqual(
      expect.arrayContaining([
        "--heartbeat-interval=10",
        "--election-timeout=100",
        "--peer-crl-file=/e/crl.pem",
      ]),
    );
  });
});
