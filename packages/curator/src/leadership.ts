/**
 * Leader election among curators, and the guard on every leader write.
 *
 * Each curator puts an election key `/leader/<lease id>` bound to a lease of
 * its own (TTL 10 s by default). The key with the lowest create revision
 * leads. A leader's writes are transactions that also compare "my election
 * key still has the create revision it had when I was elected": if the lease
 * expired (the leader was partitioned, or stopped) the key is gone, the
 * comparison fails, and the write is refused — so two leaders can never both
 * commit, whatever the clocks say.
 *
 * Reads and liveness need more than that guard: a leader cut off from the
 * etcd majority must stop answering before the majority can elect another,
 * or it serves reads from its memory that miss the new leader's writes. So
 * a candidacy keeps its own deadline (lease-deadline.ts: the monotonic time
 * of the last renewal etcd confirmed, plus the TTL, less a safety margin):
 * every call a leader serves checks it (`Leadership.assertServing`), and when
 * it passes without a newer confirmation the curator steps down at once
 * (curator-machine.ts), long before etcd3 itself would say the lease is lost
 * (twice the TTL without renewal). Only a new campaign leads again.
 */
import { performance } from "node:perf_hooks";
import type { Etcd3, Lease, Namespace } from "etcd3";
import { openWatch } from "@metropolis/consensus";
import { priv } from "@metropolis/proto";
import { LeaseUnconfirmedError, LostLeadershipError } from "./errors";
import { leaderPrefix } from "./keys";
import { LeaseDeadline, type MonotonicClock } from "./lease-deadline";

/** Where a curator serves. */
export interface CuratorEndpoint {
  nodeId: string;
  host: string;
  port: number;
}

/** The part of a transaction builder a guarded write needs (etcd3's ComparatorBuilder). */
export type Txn = ReturnType<Namespace["if"]>;

/**
 * Held by the leading curator. Every write goes through `txn()` and
 * `commit()`, never through plain puts.
 */
export class Leadership {
  #lastWriteRevision = 0n;

  constructor(
    readonly kv: Namespace,
    /** The election key, e.g. `/leader/7587862075238921234`. */
    readonly key: string,
    readonly createRevision: string,
    readonly self: CuratorEndpoint,
    /** Told when a write finds the leadership gone, so the curator campaigns again. */
    private readonly onLost: () => void = () => undefined,
    /** Until when the election lease is provably held; none: only the write guard fences. */
    readonly deadline?: LeaseDeadline,
  ) {}

  /**
   * Whether this leader may serve now: its lease is provably held (see the
   * module comment). Always true for a leadership without a deadline.
   */
  get serving(): boolean {
    return this.deadline?.valid() ?? true;
  }

  /**
   * Throws unless this leader may serve now: every read a leader answers
   * from what it holds in memory calls this at the moment it reads.
   *
   * @throws LeaseUnconfirmedError (UNAVAILABLE) once the lease deadline has passed.
   */
  assertServing(): void {
    if (this.deadline && !this.deadline.valid()) {
      throw new LeaseUnconfirmedError(this.deadline.sinceProvenMs(), this.deadline.ttlMs);
    }
  }

  /** A transaction guarded by this leadership; add further comparisons with `.and(…)`. */
  txn(): Txn {
    return this.kv.if(this.key, "Create", "==", this.createRevision);
  }

  /**
   * Commits `txn`. Returns true when it succeeded; false when one of the
   * caller's own comparisons failed; throws LostLeadershipError when the
   * leadership guard did.
   */
  async commit(txn: Txn): Promise<boolean> {
    const result = await txn.commit();
    if (result.succeeded) {
      const revision = BigInt(result.header.revision);
      if (revision > this.#lastWriteRevision) this.#lastWriteRevision = revision;
      return true;
    }
    if (!(await this.stillLeads())) {
      this.onLost();
      throw new LostLeadershipError();
    }
    return false;
  }

  /**
   * Steps down: deletes this leader's election key (only while it leads), so
   * that the next candidate in line leads; this curator campaigns again and
   * queues up behind the others.
   *
   * @throws LostLeadershipError when it no longer led anyway.
   */
  async handOver(): Promise<void> {
    await this.commit(this.txn().then(this.kv.delete().key(this.key)));
    this.onLost();
  }

  /**
   * The etcd revision of the latest write committed through this leadership
   * (0 before the first): what a copy of the leader's state must have seen
   * for its readers to see their own writes (node-record-mirror.ts).
   */
  get lastWriteRevision(): bigint {
    return this.#lastWriteRevision;
  }

  /** Whether the election key still exists with its original create revision. */
  async stillLeads(): Promise<boolean> {
    const res = await this.kv.get(this.key).exec();
    return res.kvs.length === 1 && res.kvs[0].create_revision === this.createRevision;
  }
}

/**
 * Trouble renewing the election lease, reported while it is not (yet) lost:
 * a renewal answered late (`slow`, after `tookMs`), or the keepalive stream
 * failing (`failed`; etcd3 opens it again), `sinceRenewedMs` after the last
 * answered renewal. The lease is lost once etcd has heard no renewal for its
 * TTL, so these say how close a busy leader came, and why.
 */
export type RenewalTrouble =
  { kind: "slow"; tookMs: number } | { kind: "failed"; error: Error; sinceRenewedMs: number };

/** A curator's standing in the election, from `campaign()` until its lease is lost or revoked. */
export class Candidacy {
  /**
   * Resolves, with why, when the lease is lost (expired at etcd, revoked,
   * or unrenewed for twice its TTL because etcd was unreachable), or when a
   * guarded write found the election key gone. Its deadline passing is not
   * a loss here: the leader acts on it (curator-machine.ts), and every call
   * it serves checks it (`Leadership.assertServing`).
   */
  readonly lost: Promise<Error>;
  private markLost: (why: Error) => void = () => undefined;

  constructor(
    private readonly kv: Namespace,
    private readonly lease: Lease,
    readonly key: string,
    readonly createRevision: string,
    readonly self: CuratorEndpoint,
    private readonly ttlSeconds: number,
    /** Until when the lease is provably held (lease-deadline.ts). */
    readonly deadline: LeaseDeadline,
  ) {
    this.lost = new Promise((resolve) => {
      this.markLost = resolve;
      lease.once("lost", (e: Error) => resolve(e));
    });
    lease.on("keepaliveFired", () => deadline.renewalSent());
    lease.on("keepaliveSucceeded", (res: { TTL: string }) =>
      deadline.renewalConfirmed(Number(res.TTL) * 1000),
    );
    lease.on("keepaliveFailed", () => deadline.renewalsLost());
    lease.on("keepaliveEstablished", () => deadline.renewalsLost());
  }

  /**
   * Calls `report` on every renewal of the lease answered later than a tenth
   * of its TTL, and on every failure of its keepalive stream, until the
   * candidacy ends.
   */
  onRenewalTrouble(report: (trouble: RenewalTrouble) => void): void {
    const slowMs = (this.ttlSeconds * 1000) / 10;
    let renewedAt = performance.now();
    let firedAt: number | undefined;
    this.lease.on("keepaliveFired", () => (firedAt ??= performance.now()));
    this.lease.on("keepaliveSucceeded", () => {
      renewedAt = performance.now();
      const tookMs = firedAt === undefined ? 0 : renewedAt - firedAt;
      firedAt = undefined;
      if (tookMs > slowMs) report({ kind: "slow", tookMs });
    });
    // etcd3 declares this event's argument as a keepalive response; it emits the error.
    this.lease.on("keepaliveFailed", (failure: unknown) => {
      firedAt = undefined;
      const error = failure instanceof Error ? failure : new Error(String(failure));
      report({ kind: "failed", error, sinceRenewedMs: performance.now() - renewedAt });
    });
  }

  /** The current leader: the election key with the lowest create revision. */
  async leader(): Promise<CuratorEndpoint & { leading: boolean }> {
    const res = await this.kv
      .getAll()
      .prefix(leaderPrefix)
      .sort("Create", "Ascend")
      .limit(1)
      .exec();
    const first = res.kvs[0];
    if (!first) throw new LostLeadershipError();
    const value = priv.LeaderElectionValue.decode(first.value);
    return {
      nodeId: value.nodeId,
      host: value.host,
      port: value.port,
      leading: first.key.toString() === this.key && first.create_revision === this.createRevision,
    };
  }

  /** This candidacy's leadership; only meaningful once `leader()` says it leads. */
  leadership(): Leadership {
    return new Leadership(
      this.kv,
      this.key,
      this.createRevision,
      this.self,
      () => this.markLost(new LostLeadershipError()),
      this.deadline,
    );
  }

  /**
   * Follows the election while this candidate does not lead: calls
   * `onFollow` with the leader now and after every change of an election
   * key (a leader leaving, a candidate arriving), and resolves once this
   * candidate leads. The watch is opened before the first read, so no
   * change between a read and the next wait is missed.
   */
  async followUntilLeading(
    signal: AbortSignal,
    onFollow: (leader: CuratorEndpoint) => void,
  ): Promise<void> {
    // Given up with the signal: a curator stopped along with its member must still end.
    const watcher = await openWatch(this.kv.watch().prefix(leaderPrefix), signal);
    let changes = 0;
    let failure: unknown;
    let wake = () => undefined as void;
    const onChange = () => (changes++, wake());
    watcher.on("put", onChange);
    watcher.on("delete", onChange);
    watcher.on("error", (e) => ((failure = e), wake()));
    const onAbort = () => wake();
    signal.addEventListener("abort", onAbort);
    try {
      for (;;) {
        const seen = changes;
        const { leading, ...leader } = await this.leader();
        if (leading) return;
        onFollow(leader);
        if (changes === seen && failure === undefined && !signal.aborted) {
          await new Promise<void>((resolve) => (wake = resolve));
        }
        if (failure !== undefined) throw failure;
        signal.throwIfAborted();
      }
    } finally {
      signal.removeEventListener("abort", onAbort);
      // Awaited: a watch left to cancel itself leaves etcd3 reconnecting it on
      // a timer once the member stopped (a CI run found two such at its end).
      // While etcd is unreachable this waits for etcd3's next reconnection.
      await watcher.cancel().catch(() => undefined);
    }
  }

  /**
   * Stops renewing the lease without revoking it: the election key expires
   * with the lease, as when this curator's process dies. Failover tests use it.
   */
  abandon(): void {
    this.lease.release();
  }

  /**
   * Gives up: revokes the lease, which deletes the election key. Waits at
   * most `withinMs` for etcd: cut off from it, the revocation would wait for
   * etcd3's reconnection (4.8 s seen on the testbed) while the lease expires
   * by itself anyway, so a curator stepping down or a run ending must not
   * wait on it.
   * @param withinMs how long to wait for etcd's answer; @default 1000
   */
  async resign(withinMs = 1000): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      this.lease.revoke().catch(() => undefined),
      new Promise<void>((resolve) => (timer = setTimeout(resolve, withinMs))),
    ]).finally(() => clearTimeout(timer));
  }
}

/** Options of {@link campaign}. */
export interface CampaignOptions {
  /**
   * The namespace the election lease is granted and renewed through: the
   * same prefix as `kv`, over a connection of its own (see the consensus
   * package's `memberClient`), so that renewals do not queue behind the
   * leader's own traffic on `kv`.
   * @default kv
   */
  leaseKv?: Namespace;
  /**
   * Subtracted from every proven lease expiry (lease-deadline.ts).
   * @default a fifth of the TTL
   */
  safetyMarginMs?: number;
  /**
   * The monotonic clock the lease deadline is kept on.
   * @default performance.now
   */
  now?: MonotonicClock;
}

/**
 * Enters the election: removes this node's election keys left from an
 * earlier life (their leases may still be alive for a TTL, and would block
 * a quick comeback), then puts a fresh key under a fresh lease.
 */
export async function campaign(
  kv: Namespace,
  self: CuratorEndpoint,
  ttlSeconds: number,
  options: CampaignOptions = {},
): Promise<Candidacy> {
  const existing = await kv.getAll().prefix(leaderPrefix).exec();
  for (const entry of existing.kvs) {
    let owner: string | undefined;
    try {
      owner = priv.LeaderElectionValue.decode(entry.value).nodeId;
    } catch {
      owner = undefined; // not ours to judge: it expires with its lease
    }
    if (owner === self.nodeId) await kv.delete().key(entry.key.toString()).exec();
  }
  const now = options.now ?? (() => performance.now());
  // Taken before the grant is sent: the lease is held at least until then + TTL.
  const deadline = new LeaseDeadline(now(), {
    ttlMs: ttlSeconds * 1000,
    safetyMarginMs: options.safetyMarginMs,
    now,
  });
  const lease = (options.leaseKv ?? kv).lease(ttlSeconds);
  const id = await lease.grant();
  const key = `${leaderPrefix}${id}`;
  const value = priv.LeaderElectionValue.encode({
    nodeId: self.nodeId,
    ttl: ttlSeconds,
    host: self.host,
    port: self.port,
  }).finish();
  await lease.put(key).value(Buffer.from(value)).exec();
  const res = await kv.get(key).exec();
  if (res.kvs.length !== 1) throw new LostLeadershipError();
  return new Candidacy(kv, lease, key, res.kvs[0].create_revision, self, ttlSeconds, deadline);
}

/** For tests and tools: the election keys currently in etcd, by create revision. */
export async function electionKeys(etcd: Etcd3 | Namespace): Promise<string[]> {
  const res = await etcd.getAll().prefix(leaderPrefix).sort("Create", "Ascend").keys();
  return res;
}
