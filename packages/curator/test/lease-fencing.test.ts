/**
 * A leader past its lease deadline answers nothing as the leader, even
 * before anything ends its streams or its run: a heartbeat on a stream
 * opened while it led ends the stream UNAVAILABLE (not the leader) instead
 * of being answered HEALTHY, and a listing of its in-memory copy of the
 * node records fails the same way. The leader's lease (TTL 2 s) is
 * abandoned — no renewal is sent any more, as when its host is cut off —
 * and the test waits for its deadline on the leader's own clock.
 */
import { status } from "@grpc/grpc-js";
import { common, curator } from "@metropolis/proto";
import { eventually } from "@metropolis/supervisor/testing";
import { startLeader, type LeaderFixture } from "@metropolis/curator/testing";
import { curatorServer } from "../src/curator-service";
import { LeaseUnconfirmedError } from "../src/errors";

let leader: LeaderFixture;

beforeAll(async () => {
  leader = await startLeader({
    leaderTtlSeconds: 2,
    services: (ctx) => [[curator.CuratorService, curatorServer(ctx)]],
  });
}, 60_000);
afterAll(async () => {
  await leader?.stop();
});

it("ends a heartbeat stream and refuses reads of its copy once the lease deadline passed", async () => {
  const node = await leader.addNode();
  const client = await leader.client(curator.CuratorClient, { node });
  const stream = client.heartbeat();
  const answers: curator.HeartbeatResponse[] = [];
  stream.on("data", (res: curator.HeartbeatResponse) => answers.push(res));
  const ended = new Promise<{ code: number; details: string }>((resolve) =>
    stream.on("error", (e: { code: number; details: string }) => resolve(e)),
  );
  stream.write({});
  await eventually(() => answers.length === 1, "the first heartbeat answered");
  expect(answers[0].health).toBe(common.NodeHealth.HEALTHY);
  // Its copy serves while the lease holds.
  expect((await leader.ctx.nodes.list()).map((n) => n.id)).toContain(node.nodeId);

  leader.candidacy.abandon();
  await eventually(() => !leader.ctx.leadership.serving, "the lease deadline to pass", {
    timeoutMs: 10_000,
  });
  stream.write({});
  const e = await ended;
  expect(e.code).toBe(status.UNAVAILABLE);
  expect(e.details).toMatch(/^not the leader: this curator's election lease was last proven held/);
  expect(answers).toHaveLength(1);
  await expect(leader.ctx.nodes.list()).rejects.toBeInstanceOf(LeaseUnconfirmedError);
});
