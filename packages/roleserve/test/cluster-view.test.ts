/**
 * ClusterView, event by event: a full backlog replaces the view, a resumed
 * one merges into it, the view stays as it was until a backlog completes,
 * changes move its revision, and a resumed backlog whose node count differs
 * from the view's resets it with StaleViewError. (Against a real curator:
 * directory.test.ts and curator-service.test.ts.)
 */
import { curator } from "@metropolis/proto";
import { ClusterView, StaleViewError } from "../src/cluster-view";

const { LAST_BACKLOGGED, UNSPECIFIED } = curator.WatchResponse_Progress;

function node(id: string, zone = ""): curator.Node {
  return curator.Node.fromPartial({ id, labels: new Map([["zone", zone]]) });
}

function event(fields: Partial<curator.WatchResponse>): curator.WatchResponse {
  return curator.WatchResponse.fromPartial(fields);
}

const resumeOf = (request: curator.WatchRequest): number =>
  request.kind?.$case === "nodesInCluster" ? request.kind.nodesInCluster.resumeFromRevision : -1;

const zones = (view: ClusterView) =>
  Object.fromEntries([...view.nodes].map(([id, n]) => [id, n.labels.get("zone")]));

/** A view complete with one full backlog of `ids` (zone ""), as of revision 5. */
function viewOf(...ids: string[]): ClusterView {
  const view = new ClusterView();
  view.begin();
  view.apply(
    event({
      nodes: ids.map((id) => node(id)),
      progress: LAST_BACKLOGGED,
      revision: 5,
      nodeCount: ids.length,
    }),
  );
  return view;
}

describe("ClusterView", () => {
  it("starts afresh, completes with the backlog, and follows changes with their revisions", () => {
    const view = new ClusterView();
    expect(resumeOf(view.begin())).toBe(0);
    expect(view.apply(event({ nodes: [node("a"), node("b")] }))).toBe(false);
    // Half a backlog is not the view.
    expect(view.nodes.size).toBe(0);
    expect(
      view.apply(
        event({ nodes: [node("c")], progress: LAST_BACKLOGGED, revision: 10, nodeCount: 3 }),
      ),
    ).toBe(true);
    expect([...view.nodes.keys()].sort()).toEqual(["a", "b", "c"]);
    expect(view.revision).toBe(10);

    expect(view.apply(event({ nodes: [node("a", "x")], revision: 11 }))).toBe(true);
    expect(view.apply(event({ nodeTombstones: [{ nodeId: "b" }], revision: 12 }))).toBe(true);
    expect(zones(view)).toEqual({ a: "x", c: "" });
    expect(view.revision).toBe(12);
    // The next watch resumes from there.
    expect(resumeOf(view.begin())).toBe(12);
  });

  it("merges a resumed backlog, keeping the view as it was until the backlog completes", () => {
    const view = viewOf("a", "b");
    expect(resumeOf(view.begin())).toBe(5);
    expect(view.apply(event({ nodes: [node("b", "y")], resumed: true }))).toBe(false);
    expect(zones(view)).toEqual({ a: "", b: "" });
    expect(
      view.apply(
        event({
          nodes: [node("c")],
          progress: LAST_BACKLOGGED,
          revision: 9,
          nodeCount: 3,
          resumed: true,
        }),
      ),
    ).toBe(true);
    expect(zones(view)).toEqual({ a: "", b: "y", c: "" });
    expect(view.revision).toBe(9);
  });

  it("replaces the view with a full backlog (a leader that could not resume)", () => {
    const view = viewOf("a", "gone");
    view.begin();
    view.apply(
      event({ nodes: [node("a", "z")], progress: LAST_BACKLOGGED, revision: 7, nodeCount: 1 }),
    );
    expect(zones(view)).toEqual({ a: "z" });
  });

  it("resets on a resumed backlog that shows missed deletions, so the next watch starts afresh", () => {
    const view = viewOf("a", "b");
    view.begin();
    let thrown: unknown;
    try {
      view.apply(event({ progress: LAST_BACKLOGGED, revision: 8, nodeCount: 1, resumed: true }));
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(StaleViewError);
    expect(thrown).toMatchObject({ held: 2, nodeCount: 1 });
    expect(String(thrown)).toMatch(/holds 2 nodes but the cluster has 1/);
    expect(view.nodes.size).toBe(0);
    expect(resumeOf(view.begin())).toBe(0);
  });

  it("keeps the etcd cluster ID with the revision and sends both back; a full backlog of another cluster replaces both and the view", () => {
    const tokenOf = (request: curator.WatchRequest) =>
      request.kind?.$case === "nodesInCluster" ? request.kind.nodesInCluster : undefined;
    const view = new ClusterView();
    expect(tokenOf(view.begin())).toEqual({ resumeFromRevision: 0, resumeEtcdClusterId: "" });
    view.apply(
      event({
        nodes: [node("a"), node("lost")],
        progress: LAST_BACKLOGGED,
        revision: 40,
        nodeCount: 2,
        etcdClusterId: "111",
      }),
    );
    view.apply(event({ nodes: [node("a", "x")], revision: 41, etcdClusterId: "111" }));
    expect(tokenOf(view.begin())).toEqual({ resumeFromRevision: 41, resumeEtcdClusterId: "111" });
    // The cluster restored from a backup: another etcd cluster, at a lower
    // revision, without the node written after the backup.
    view.apply(
      event({
        nodes: [node("a")],
        progress: LAST_BACKLOGGED,
        revision: 30,
        nodeCount: 1,
        etcdClusterId: "222",
      }),
    );
    expect(zones(view)).toEqual({ a: "" });
    expect(tokenOf(view.begin())).toEqual({ resumeFromRevision: 30, resumeEtcdClusterId: "222" });
    // A StaleViewError resets both.
    expect(() =>
      view.apply(
        event({
          progress: LAST_BACKLOGGED,
          revision: 31,
          nodeCount: 0,
          resumed: true,
          etcdClusterId: "222",
        }),
      ),
    ).toThrow(StaleViewError);
    expect(tokenOf(view.begin())).toEqual({ resumeFromRevision: 0, resumeEtcdClusterId: "" });
  });

  it("keeps revision 0 from a leader that sends none, so every watch starts afresh", () => {
    const view = new ClusterView();
    view.begin();
    view.apply(event({ nodes: [node("a")], progress: LAST_BACKLOGGED }));
    view.apply(event({ nodes: [node("a", "q")], progress: UNSPECIFIED }));
    expect(zones(view)).toEqual({ a: "q" });
    expect(resumeOf(view.begin())).toBe(0);
  });
});
