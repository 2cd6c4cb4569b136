/**
 * Owners' listings encoded once per record (node-listing.ts): the bytes are
 * those the generated encoder writes for the same listing, a changed record
 * is encoded afresh, and the answer is served as it is under
 * managementService and still correctly under the stock definition.
 */
import { randomBytes } from "node:crypto";
import { api, common, priv } from "@metropolis/proto";
import { HeartbeatTracker } from "../src/heartbeat-tracker";
import { toApiNode } from "../src/management-nodes";
import { managementService } from "../src/management-service";
import { EncodedNodeList, encodeNodeList } from "../src/node-listing";
import type { StoredNode } from "../src/node-record";

function stored(i: number, node: Partial<priv.Node> = {}): StoredNode {
  return {
    id: `metropolis-${i.toString(16).padStart(32, "0")}`,
    node: priv.Node.fromPartial({
      publicKey: randomBytes(32),
      state: common.NodeState.UP,
      ...node,
    }),
    modRevision: String(i + 1),
  };
}

const nodes: StoredNode[] = [
  stored(1, {
    status: { externalAddress: "127.0.0.2", version: "v1", bootId: "b", protocolVersion: 1 },
    roles: { kubernetesWorker: {} },
    labels: new Map([
      ["rack", "r1"],
      ["zone", "z"],
    ]),
  }),
  stored(2, { state: common.NodeState.NEW }), // no status, no roles, no labels
  stored(3, {
    roles: common.NodeRoles.fromPartial({
      consensusMember: { peers: [{ name: "x", peerUrl: "https://h:1" }] },
    }),
  }),
];

describe("encodeNodeList", () => {
  let now = 1_000;
  const heartbeats = new HeartbeatTracker(100, () => now);
  const ctx = { heartbeats };

  it("writes the bytes GetNodesResponse.encode writes for the same listing", () => {
    heartbeats.beat(nodes[0].id); // HEALTHY, age 0
    now += 40;
    heartbeats.beat(nodes[2].id);
    now += 70; // nodes[0] timed out at 110 ms; nodes[1] never beat; nodes[2] HEALTHY at 70 ms
    const expected = api.GetNodesResponse.encode({
      nodes: nodes.map((n) => toApiNode(ctx, n)),
    }).finish();
    const listing = encodeNodeList(ctx, nodes);
    expect(listing.bytes.equals(Buffer.from(expected))).toBe(true);
    const decoded = api.GetNodesResponse.decode(listing.bytes).nodes;
    expect(decoded.map((n) => n.health)).toEqual([
      common.NodeHealth.HEARTBEAT_TIMEOUT,
      common.NodeHealth.HEARTBEAT_TIMEOUT,
      common.NodeHealth.HEALTHY,
    ]);
    expect(decoded.map((n) => n.timeSinceHeartbeatMs)).toEqual([110, undefined, 70]);
    expect(decoded[0].labels.get("zone")).toBe("z");
    // A later listing has the heartbeat ages of its own time, from the same record parts.
    now += 5;
    const later = api.GetNodesResponse.decode(encodeNodeList(ctx, nodes).bytes).nodes;
    expect(later.map((n) => n.timeSinceHeartbeatMs)).toEqual([115, undefined, 75]);
  });

  it("encodes a changed record afresh: the mirror replaces the record object", () => {
    const before = stored(4, { labels: new Map([["a", "1"]]) });
    expect(
      api.GetNodesResponse.decode(encodeNodeList(ctx, [before]).bytes).nodes[0].labels,
    ).toEqual(new Map([["a", "1"]]));
    const after: StoredNode = {
      ...before,
      node: { ...before.node, labels: new Map([["a", "2"]]) },
      modRevision: "99",
    };
    expect(api.GetNodesResponse.decode(encodeNodeList(ctx, [after]).bytes).nodes[0].labels).toEqual(
      new Map([["a", "2"]]),
    );
  });

  it("is sent as it is under managementService, and re-encoded under the stock definition", () => {
    const listing = encodeNodeList(ctx, nodes);
    expect(managementService.getNodes.responseSerialize(listing)).toBe(listing.bytes);
    const stock = api.ManagementService.getNodes.responseSerialize(listing);
    expect(stock.equals(listing.bytes)).toBe(true);
    // Plain messages still go through the generated encoder.
    const plain = { nodes: [toApiNode(ctx, nodes[1])] };
    expect(
      managementService.getNodes
        .responseSerialize(plain)
        .equals(api.ManagementService.getNodes.responseSerialize(plain)),
    ).toBe(true);
    expect(listing).toBeInstanceOf(EncodedNodeList);
    expect(listing.nodes.map((n) => n.id)).toEqual(nodes.map((n) => n.id));
  });
});
