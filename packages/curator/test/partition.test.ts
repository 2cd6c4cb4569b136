/**
 * Two leaders never both commit: three candidates on a real 3-member etcd,
 * each talking to ONE member only, so that stopping a member cuts its
 * candidate off exactly as a network partition would. While the leader's
 * member is paused (SIGSTOP) or killed (SIGKILL), the old leader keeps
 * trying guarded writes: none may ever commit — neither while cut off, nor
 * late, once its member is back and delivers what it had queued — while
 * exactly one of the other two takes over and commits.
 *
 * Nor do two leaders ever both serve: the old leader's own lease deadline
 * (lease-deadline.ts) has passed before any other candidate leads; without
 * it etcd3 gave the lease up only after twice its TTL, a TTL after the
 * successor took over.
 *
 * How fast the takeover comes is not asserted: it is the lease TTL plus an
 * etcd election (when the cut-off member led raft) plus etcd's lease-expiry
 * sweep, which on a busy shared machine runs well past TTL + 1 s.
 */
import { noop } from "cockatiel";
import { type Etcd3, type Namespace } from "etcd3";
import { ConsensusClient } from "@metropolis/consensus";
import { eventually } from "@metropolis/supervisor/testing";
import { startEtcdCluster, type EtcdCluster, type EtcdMember } from "@metropolis/consensus/testing";
import { LeaseUnconfirmedError, LostLeadershipError } from "../src/errors";
import { campaign, type Candidacy, type CuratorEndpoint, type Leadership } from "../src/leadership";

/** Election lease TTL: short, so that a takeover is quick. */
const ttlSeconds = 1;
/** How long one guarded write of the cut-off leader is waited for before the next is tried. */
const attemptTimeoutMs = 250;
/** Deadline for the cluster to settle after the member is back (reconnects, queued requests). */
const recoveryMs = 15_000;
/**
 * Deadline for one of the others to take over: far past the lease TTL, so
 * that only a takeover that never comes (a lease kept alive, a candidate
 * that misses the deletion of the leader's key) fails the test, not a slow machine.
 */
const takeoverMs = 10_000;

const valueKey = "/partition/value";
/** Each committed write also leaves a key of its own, so that every commit can be counted. */
const logKey = (tag: string) => `/partition/log/${tag}`;

/** What became of one guarded write. */
type Outcome = "committed" | "refused" | "lost" | "timeout" | `error: ${string}`;

interface Candidate {
  index: number;
  member: EtcdMember;
  kv: Namespace;
  candidacy: Candidacy;
}

const endpoint = (n: number): CuratorEndpoint => ({
  nodeId: `metropolis-${(0xc0 + n).toString(16).padStart(32, "0")}`,
  host: "127.0.0.1",
  port: 7835 + n,
});

/** A guarded write of `tag`, as every leader write is. */
async function guardedWrite(leadership: Leadership, kv: Namespace, tag: string): Promise<Outcome> {
  try {
    const txn = leadership.txn().then(kv.put(valueKey).value(tag), kv.put(logKey(tag)).value(tag));
    return (await leadership.commit(txn)) ? "committed" : "refused";
  } catch (e) {
    return e instanceof LostLeadershipError ? "lost" : `error: ${String(e)}`;
  }
}

/** What `p` resolves to, or "timeout" after `ms` (p itself goes on). */
function within<T>(p: Promise<T>, ms: number): Promise<T | "timeout"> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<"timeout">((resolve) => {
    timer = setTimeout(() => resolve("timeout"), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

let cluster: EtcdCluster | undefined;
let candidates: Candidate[] = [];

/** A client bound to `member` only: when that member stops, so does everything this client does. */
function clientOf(c: EtcdCluster, member: EtcdMember): Etcd3 {
  return c.client({
    hosts: [member.clientUrl],
    faultHandling: { host: () => noop, global: noop },
    // Reconnect quickly once a killed member is back (grpc-js waits 1 s, growing, by default).
    grpcOptions: { "grpc.initial_reconnect_backoff_ms": 50, "grpc.max_reconnect_backoff_ms": 500 },
  });
}

beforeEach(async () => {
  cluster = await startEtcdCluster(3);
  candidates = [];
  // One after the other: the first to campaign has the lowest create revision and leads.
  for (const [index, member] of cluster.members.entries()) {
    const kv = ConsensusClient.root(clientOf(cluster, member)).sub("curator").kv;
    candidates.push({
      index,
      member,
      kv,
      candidacy: await campaign(kv, endpoint(index), ttlSeconds),
    });
  }
});

afterEach(async () => {
  for (const c of candidates) await c.candidacy.resign();
  // Stops every member by its PID (SIGCONT first for a paused one), closes the clients.
  await cluster?.stop();
  cluster = undefined;
});

/** How the leader's member is cut off, and brought back. */
interface Fault {
  name: string;
  cut(member: EtcdMember): Promise<void> | void;
  heal(member: EtcdMember): Promise<void> | void;
  /** Outcomes a write of the cut-off leader may have while it is cut off. */
  allowed: (o: Outcome) => boolean;
}

const paused: Fault = {
  name: "paused (SIGSTOP)",
  cut: (m) => m.pause(),
  heal: (m) => m.resume(),
  // A paused member answers nothing: a write either hangs, or learns its key is gone.
  allowed: (o) => o === "lost" || o === "timeout",
};

const killed: Fault = {
  name: "killed (SIGKILL) and restarted",
  cut: (m) => m.kill(),
  heal: (m) => m.restart(),
  // A dead member refuses connections: the write fails at once.
  allowed: (o) => o === "lost" || o === "timeout" || o.startsWith("error: "),
};

async function leaderCutOff(fault: Fault): Promise<void> {
  const c = cluster!;
  const [old, ...others] = candidates;
  const views = await Promise.all(candidates.map((x) => x.candidacy.leader()));
  expect(views.map((v) => v.leading)).toEqual([true, false, false]);
  const oldLeadership = old.candidacy.leadership();
  expect(await guardedWrite(oldLeadership, old.kv, "old-before")).toBe("committed");

  await fault.cut(old.member);

  // The old leader keeps writing, each attempt given up on (but not cancelled) after a while.
  const late: Promise<Outcome>[] = [];
  const whileCut: Outcome[] = [];
  let writing = true;
  const oldWriter = (async () => {
    for (let n = 0; writing; n++) {
      const attempt = guardedWrite(oldLeadership, old.kv, `old-${n}`);
      late.push(attempt);
      const outcome = await within(attempt, attemptTimeoutMs);
      whileCut.push(outcome);
      // A dead member refuses at once: pace the retries rather than spin.
      if (outcome !== "timeout") await new Promise((r) => setTimeout(r, 20));
    }
  })();

  // Exactly one of the others takes over once the lease expires, and both agree which.
  // Whether the old leader would serve a call, asked as a poll first sees a successor lead.
  let oldServingAtTakeover: boolean | undefined;
  const successor = await eventually(
    async () => {
      for (const o of others) {
        const view = await within(o.candidacy.leader(), 200);
        if (view !== "timeout" && view.leading) {
          oldServingAtTakeover = oldLeadership.serving;
          return o;
        }
      }
      return undefined;
    },
    "a new leader",
    { timeoutMs: takeoverMs, intervalMs: 20 },
  );
  // Fencing: the old leader had stopped before anyone else led.
  expect(oldServingAtTakeover).toBe(false);
  expect(() => oldLeadership.assertServing()).toThrow(LeaseUnconfirmedError);
  const otherViews = await Promise.all(others.map((o) => o.candidacy.leader()));
  expect(otherViews.filter((v) => v.leading)).toHaveLength(1);
  expect(new Set(otherViews.map((v) => v.nodeId))).toEqual(
    new Set([successor.candidacy.self.nodeId]),
  );

  // Its writes commit, while the old leader is still trying.
  const newLeadership = successor.candidacy.leadership();
  const newTags = ["new-0", "new-1", "new-2"];
  for (const tag of newTags) {
    expect(await guardedWrite(newLeadership, successor.kv, tag)).toBe("committed");
  }
  writing = false;
  await oldWriter;
  expect(whileCut.length).toBeGreaterThan(0);
  expect(whileCut.filter((o) => !fault.allowed(o))).toEqual([]);
  await fault.heal(old.member);

  // Whatever the old leader had queued is delivered now, and refused.
  const lateOutcomes = await Promise.all(late.map((p) => within(p, recoveryMs)));
  expect(
    lateOutcomes.filter((o) => o === "committed" || o === "refused" || o === "timeout"),
  ).toEqual([]);
  // Once its member answers again, the old leadership is refused as such.
  const afterHeal: Outcome[] = [];
  await eventually(
    async () => {
      const outcome = await within(guardedWrite(oldLeadership, old.kv, "old-after"), 1000);
      afterHeal.push(outcome);
      return outcome === "lost" ? outcome : undefined;
    },
    "the old leader's write refused for lost leadership",
    { timeoutMs: recoveryMs, intervalMs: 20 },
  );
  expect(afterHeal).not.toContain("committed");

  // Read through every member: only the new leader's writes landed since the cut.
  const reader = c.client({ faultHandling: { host: () => noop, global: noop } });
  const kv = ConsensusClient.root(reader).sub("curator").kv;
  expect(await kv.get(valueKey).string()).toBe("new-2");
  const log = await kv.getAll().prefix("/partition/log/").keys();
  expect(log.sort()).toEqual(["old-before", ...newTags].map(logKey).sort());
}

describe("two leaders never both commit", () => {
  it.each([paused, killed])(
    "when the leader's etcd member is $name",
    async (fault) => {
      await leaderCutOff(fault);
    },
    40_000,
  );
});
