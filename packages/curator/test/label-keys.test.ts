/**
 * Label keys that are also names of `Object.prototype` members, through a
 * real leader over real mTLS gRPC. Labels used to travel as plain objects, in
 * which a key `__proto__` vanished: answered OK and silently dropped. Since
 * protobuf maps are JS `Map`s every key reaches validation, and these tests
 * keep it so: `__proto__` (not a valid Kubernetes label key) is refused with
 * INVALID_ARGUMENT naming it; `constructor` and `prototype` (valid label
 * keys) are stored, listed, filtered on and removed like any other key.
 */
import { status, type ServiceError } from "@grpc/grpc-js";
import { nodeIdFromPublicKey } from "@metropolis/pki";
import { api, common, curator, protocolVersion } from "@metropolis/proto";
import { curatorServer } from "../src/curator-service";
import { managementServer, managementService } from "../src/management-service";
import { newKeyPair, startLeader, type LeaderFixture } from "@metropolis/curator/testing";
import { expectCode } from "./expect-code";

type Callback<Res> = (err: ServiceError | null, res?: Res) => void;

function rpc<Res>(start: (cb: Callback<Res>) => unknown): Promise<Res> {
  return new Promise<Res>((resolve, reject) =>
    start((err, res) => (err ? reject(err) : resolve(res as Res))),
  );
}

let leader: LeaderFixture;
let owner: api.ManagementClient;
let ticket: Buffer;

beforeAll(async () => {
  leader = await startLeader({
    services: (ctx) => [
      [curator.CuratorService, curatorServer(ctx)],
      [managementService, managementServer(ctx)],
    ],
  });
  owner = await leader.client(api.ManagementClient, "owner");
  ticket = (await rpc<api.GetRegisterTicketResponse>((cb) => owner.getRegisterTicket({}, cb)))
    .ticket;
}, 30_000);

afterAll(async () => {
  await leader?.stop();
});

/** RegisterNode of a fresh node with `labels` and a valid ticket; returns the node's ID. */
async function register(
  labels: Map<string, string>,
): Promise<{ id: string; answer: Promise<unknown> }> {
  const key = newKeyPair();
  const client = await leader.client(curator.CuratorClient, { ephemeral: key.privateKey });
  const answer = rpc<curator.RegisterNodeResponse>((cb) =>
    client.registerNode(
      { registerTicket: ticket, joinKey: newKeyPair().publicKey, labels, protocolVersion },
      cb,
    ),
  );
  return { id: nodeIdFromPublicKey(key.publicKey), answer };
}

const updateLabels = (req: Partial<api.UpdateNodeLabelsRequest>) =>
  rpc<api.UpdateNodeLabelsResponse>((cb) =>
    owner.updateNodeLabels(api.UpdateNodeLabelsRequest.fromPartial(req), cb),
  );

const byId = (id: string) => ({ $case: "id" as const, id });

describe("__proto__ as a label key", () => {
  const named = /"__proto__"/;

  it("is refused by RegisterNode, naming it, and no record is created", async () => {
    for (const labels of [
      new Map([["__proto__", "x"]]),
      new Map([["__proto__", ""]]),
      new Map([
        ["rack", "r1"],
        ["__proto__", "x"],
      ]),
    ]) {
      const { id, answer } = await register(labels);
      await expectCode(answer, status.INVALID_ARGUMENT, named);
      expect(await leader.getNode(id)).toBeUndefined();
    }
  });

  it("is refused by UpdateNodeLabels, to add or to remove, naming it", async () => {
    const node = await leader.addNode({ labels: new Map([["keep", "me"]]) });
    await expectCode(
      updateLabels({ node: byId(node.nodeId), add: new Map([["__proto__", "x"]]) }),
      status.INVALID_ARGUMENT,
      named,
    );
    await expectCode(
      updateLabels({ node: byId(node.nodeId), remove: ["__proto__"] }),
      status.INVALID_ARGUMENT,
      named,
    );
    expect((await leader.getNode(node.nodeId))?.labels).toEqual(new Map([["keep", "me"]]));
  });
});

describe("constructor and prototype as label keys", () => {
  const labels = new Map([
    ["constructor", "c"],
    ["prototype", "p"],
  ]);

  it("are stored by RegisterNode and listed by GetNodes", async () => {
    const { id, answer } = await register(labels);
    await answer;
    expect((await leader.getNode(id))?.labels).toEqual(labels);
    const listed = await rpc<api.GetNodesResponse>((cb) =>
      owner.getNodes(
        api.GetNodesRequest.fromPartial({ labels: new Map([["constructor", "c"]]) }),
        cb,
      ),
    );
    expect(listed.nodes.map((n) => n.id)).toEqual([id]);
    expect(listed.nodes[0].labels).toEqual(labels);
    expect(listed.nodes[0].state).toBe(common.NodeState.NEW);
  });

  it("are added and removed by UpdateNodeLabels", async () => {
    const node = await leader.addNode();
    await updateLabels({ node: byId(node.nodeId), add: labels });
    expect((await leader.getNode(node.nodeId))?.labels).toEqual(labels);
    await updateLabels({ node: byId(node.nodeId), remove: ["constructor"] });
    expect((await leader.getNode(node.nodeId))?.labels).toEqual(new Map([["prototype", "p"]]));
  });
});
