import { Etcd3 } from "etcd3";
import { ConsensusClient } from "@metropolis/consensus";
import { InvalidNamespaceError } from "../src/errors";

describe("ConsensusClient", () => {
  // No etcd is contacted: namespaces are computed locally.
  const etcd = new Etcd3({ hosts: "127.0.0.1:1" });
  afterAll(() => etcd.close());

  it("confines users to namespaced:<a>:<b>/ prefixes", () => {
    const root = ConsensusClient.root(etcd);
    expect(root.prefix).toBe("");
    expect(root.sub("curator").prefix).toBe("namespaced:curator/");
    expect(root.sub("curator").sub("pki").prefix).toBe("namespaced:curator:pki/");
    expect(root.sub("curator").sub("pki").path).toEqual(["curator", "pki"]);
  });

  it.each(["", "a:b", "a/b", ":", "/"])("rejects the segment %p", (segment) => {
    expect(() => ConsensusClient.root(etcd).sub(segment)).toThrow(InvalidNamespaceError);
    expect(() => ConsensusClient.root(etcd).sub(segment)).toThrow(
      /must be non-empty and contain neither ':' nor '\/'/,
    );
  });
});
