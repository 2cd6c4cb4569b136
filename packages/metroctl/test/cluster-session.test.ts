/**
 * ClusterSession's streams against a real leader (real etcd, real mTLS on
 * loopback) whose WatchNodes never answers, as a hung leader's open
 * connection does: the stream is given up at the dial timeout, and with it
 * the leader; a stream the leader accepts keeps it.
 */
import { CommandContext } from "../src/command-context";
import { ClusterSession } from "../src/cluster-session";
import { StreamNotAcceptedError } from "../src/errors";
import { Capture, startCluster, type MetroctlCluster } from "./cluster-fixture";

let cluster: MetroctlCluster;
let session: ClusterSession;
const streams = new AbortController();

beforeAll(async () => {
  // Accepted by the server, never answered: no headers, no message.
  cluster = await startCluster({
    management: (real) => ({ ...real, watchNodes: () => undefined }),
  });
  const config = await cluster.ownerConfig();
  const ctx = new CommandContext(
    { stdout: new Capture(), stderr: new Capture(), env: { HOME: config } },
    { config, dialTimeout: "1" },
  );
  session = await ClusterSession.asOwner(ctx);
}, 30_000);

afterAll(async () => {
  streams.abort();
  session.close();
  await cluster.stop();
});

describe("ClusterSession streams", () => {
  it("keeps a leader that accepts its stream: the next call asks no curator", async () => {
    const { stream } = await session.watchClusterConsensus(streams.signal);
    stream.on("error", () => undefined);
    const asked = cluster.leaderQuestions;
    expect(asked).toBeGreaterThan(0);
    await session.getNodes();
    expect(cluster.leaderQuestions).toBe(asked);
  });

  it("gives a stream up at the dial timeout when the leader does not accept it, and the leader with it", async () => {
    const watch = session.watchNodes({ heartbeats: true }, streams.signal);
    await expect(watch).rejects.toThrow(
      new StreamNotAcceptedError("Management.WatchNodes", cluster.leader.ctx.self.nodeId, 1000),
    );
    // Given up: the next call asks who leads again (and takes the leader back, which answers).
    const asked = cluster.leaderQuestions;
    await session.getNodes();
    expect(cluster.leaderQuestions).toBeGreaterThan(asked);
  });
});
