/**
 * A CuratorConnection's HTTP/2 keepalive: a ping every 10 s while calls are
 * open, the connection given up when one is not answered within 20 s (gRPC's
 * own default timeout). A curator whose process hangs (or whose machine is
 * cut off without the connection being reset) keeps the connection open, and
 * this is how a client without a heartbeat (an operator's) notices it: its
 * calls and streams there fail within 30 s. A node notices sooner, by its
 * heartbeat, and pings less often (roleserve's `nodeCuratorKeepalive`). It
 * was 5 s / 5 s: a leader busy with a cluster's nodes attaching answered
 * pings later than that, every node whose ping waited dropped its
 * connection, and each came back with a new TLS handshake, which loaded the
 * leader further (the scale simulator's 3,000 nodes fell from 2,050 HEALTHY
 * to 850 that way).
 */
export const defaultCuratorKeepalive: CuratorKeepalive = {
  timeMs: 10_000,
  timeoutMs: 20_000,
};

/**
 * CuratorConnection: how every other part of the system talks to the
 * cluster's control plane. Given any curators it knows of, it asks one of
 * them where the leader is (CuratorLocal.GetCurrentLeader), talks to the
 * leader, and when the leader goes away or moves (a call answered
 * UNAVAILABLE, or a connection that fails), asks again and retries — so a
 * leader failover is a short delay for its users, not an error.
 *
 * Only consensus members run curators, and a client believes no one else:
 * every curator it knows of is bound to the node that runs it (the
 * consensus members of the cluster's records, as the node's directory says),
 * and only that node's certificate is accepted there; the leader a verified
 * curator names is dialled expecting that leader's certificate. Any other
 * node of the cluster — whose certificate the CA vouches for just as well —
 * is refused, so a node without the consensus role cannot pose as a
 * curator. Only an operator's client may give a bare address (an address
 * it vouches for), where any node of the cluster may say who leads.
 */
import type {
  ChannelCredentials,
  ChannelInterface,
  ChannelOptions,
  ClientReadableStream,
  ServiceError,
} from "@grpc/grpc-js";
import { Channel, connectivityState, status } from "@grpc/grpc-js";
import { isIP } from "node:net";
import type { SecureContext } from "node:tls";
import { isNodeId } from "@metropolis/pki";
import { api, curator as curatorProto } from "@metropolis/proto";
import {
  abortable,
  abortableSleep,
  answerDeadline,
  Backoff,
  resolveBackoff,
  withoutStackTrace,
} from "@metropolis/supervisor";
import { formatCuratorAddress, type CuratorAddress } from "./curator-addresses";
import { curatorClientContext, curatorClientCredentials } from "./credentials";
import type { CuratorEndpoint } from "./leadership";
import { notTheLeaderAnswer } from "./not-the-leader";
import { quietCancel } from "./quiet-cancel";
import { stacklessStatus } from "./stackless-status";

/** HTTP/2 keepalive of a CuratorConnection: a ping every `timeMs` while calls are open, `timeoutMs` to answer it. */
export type CuratorKeepalive = Readonly<{ timeMs: number; timeoutMs: number }>;

export interface CuratorConnectionOptions {
  /** Curators to ask where the leader is. */
  endpoints: readonly CuratorAddress[];
  /** The cluster CA certificate (PEM). */
  ca: string;
  /** The client certificate and key (PEM): a node's, the owner's, or a self-signed one. */
  identity?: { cert: string; key: string };
  /**
   * HTTP/2 keepalive while calls are open: a ping every `timeMs`, and the
   * connection is given up when one is not answered within `timeoutMs`.
   * A curator whose process hangs (or whose machine is cut off without the
   * connection being reset) answers no pings, so its open streams (Watch,
   * Heartbeat) fail within `timeMs + timeoutMs` and their users find the new
   * leader, instead of waiting on a stream that will never speak again.
   * @default {@link defaultCuratorKeepalive}
   */
  keepalive?: CuratorKeepalive;
  /**
   * Keep a connection open to every curator known by node ID, not only to the
   * leader, so that after a failover the new leader is one this client is
   * connected to already: a whole cluster's nodes then come to it without a
   * TLS handshake each (2–3 ms of CPU on each side, the largest part of a
   * node's reconnection). They are opened a random part of `spreadMs` after
   * a leader is found (so that a cluster starting at once does not make all
   * its handshakes in the same second), and again after each change of
   * leader or of the curators known (a curator that restarted). A node keeps
   * them; a command-line tool has no use for them. Default: off.
   */
  standby?: { spreadMs: number };
  /**
   * Give the leader up as unresponsive when a call on it runs out of time
   * (DEADLINE_EXCEEDED), as {@link CuratorConnection.leaderUnresponsive}
   * does: the next call asks the curators again, and takes it back once it
   * answers a question itself, unless they name another first. A leader
   * whose process hangs keeps its connections open and READY, so that a
   * client without a heartbeat (an operator's) otherwise sent it every
   * call, each running to its deadline, until the HTTP/2 keepalive failed,
   * up to 30 s later. A call that ran out of time only because the search
   * before it took most of its time costs one question to a leader that
   * answers. A node turns it off: its heartbeat is its liveness check, with
   * the curator's own timeout, and a unary call of a node that ran out of
   * time under a loaded leader would otherwise end the node's streams there.
   * @default true
   */
  giveUpOnDeadline?: boolean;
}

/** gRPC clients of the current leader. */
export interface LeaderClients {
  endpoint: CuratorEndpoint;
  curator: curatorProto.CuratorClient;
  management: api.ManagementClient;
  aaa: api.AAAClient;
  /**
   * Aborted when the connection gives this leader up (a call or stream on
   * it failed, or it stopped answering: {@link CuratorConnection.leaderFailed},
   * {@link CuratorConnection.leaderUnresponsive}), with the reason. A stream
   * held open on the leader ends then, so that every user of the connection
   * moves to the next leader together: the one that noticed has the
   * connection look for it, and a stream still open on the old one would
   * wait there for a keepalive to fail.
   */
  dropped: AbortSignal;
}

/**
 * Why a leader was given up: `unreachable` (a call failed as unavailable;
 * being able to connect to it again, over a new connection, is proof enough
 * that it is back), `unresponsive` (it held a call open without answering:
 * connected, so only an answer proves it back), `refused` (it answered, but
 * not as the leader: "not the leader", or UNIMPLEMENTED from a follower of
 * an older version; taken back only after its backoff, see
 * {@link candidateBackoff}), or `replaced` (the connection was closed).
 */
type LeaderLoss = "unreachable" | "unresponsive" | "refused" | "replaced";

/** The time on the monotonic clock, in ms: every deadline and backoff of this client (a wall-clock jump moves none). */
const now = (): number => performance.now();

/*
 * The four errors of the curator client below deliberately do not extend
 * CuratorError: its `code` is the gRPC status a call is answered with, and
 * callers read `code` off whatever a call threw (isRetryable below,
 * @metropolis/cluster's dialling, @metropolis/roleserve's CuratorStreamError)
 * to decide whether to retry. These are not answers of a curator, and a code
 * on them would change what is retried. They set `name` as CuratorError does.
 */

/** No curator could say who leads before the deadline. */
export class NoLeaderError extends Error {
  constructor(endpoints: readonly CuratorAddress[], cause: unknown) {
    super(
      `no curator leader found through ${endpoints.map(formatCuratorAddress).join(", ")}: ${cause instanceof Error ? cause.message : String(cause)}`,
      { cause },
    );
    this.name = new.target.name;
  }
}

/**
 * No curator could be reached with a certificate that verifies against the
 * cluster CA before the caller's deadline: the last failure was TLS refusing
 * the server's certificate (a certificate of another CA, a self-signed one,
 * or one unfit for a server; see {@link isCertificateRefused}). Such a
 * failure is retried like an unreachable curator until then — a curator's
 * address may present another certificate for a moment (the address moving
 * to the node that is to serve there, a process of an earlier cluster still
 * bound to it) — and the certificate is never trusted. A NoLeaderError, so
 * that whoever handles that one handles this one; its `cause` is the
 * refused connection's gRPC failure.
 */
export class CuratorCertificateNotVerifiedError extends NoLeaderError {
  constructor(endpoints: readonly CuratorAddress[], cause: unknown) {
    super(endpoints, cause);
    this.message = `the curator's certificate did not verify against the cluster CA (through ${endpoints.map(formatCuratorAddress).join(", ")}, until the deadline): ${refusalOf(cause)}`;
    this.name = new.target.name;
  }
}

/**
 * The search for the leader that this caller shares with others (one search
 * at a time, see CuratorConnection's `leaderClients`) found none within this
 * caller's own time; the search goes on for the callers with more time. A
 * NoLeaderError, so that whoever handles that one handles this one.
 */
export class LeaderSearchTimeoutError extends NoLeaderError {
  constructor(
    endpoints: readonly CuratorAddress[],
    /** The caller's time, from its call to its deadline. */
    readonly timeoutMs: number,
  ) {
    super(
      endpoints,
      `none within this caller's ${Math.round(timeoutMs)} ms (the search under way is another caller's)`,
    );
    this.name = new.target.name;
  }
}

/** The search for the leader was ended by CuratorConnection.close(). */
export class CuratorConnectionClosedError extends Error {
  constructor() {
    super("the curator connection was closed while it looked for the leader");
    this.name = new.target.name;
  }
}

/**
 * A curator did not say who leads before the search's deadline (the search
 * then tells its caller with NoLeaderError, this as its cause).
 */
export class UnansweredLeaderQuestionError extends Error {
  constructor(address: CuratorAddress, askedForMs: number) {
    super(
      `curator at ${formatCuratorAddress(address)} did not say who leads within ${Math.round(askedForMs)} ms`,
    );
    this.name = new.target.name;
  }
}

/** A curator's answer to "who leads?" that a client cannot use. */
export class UnusableLeaderAnswerError extends Error {
  constructor(address: CuratorAddress, why: string) {
    super(`curator at ${formatCuratorAddress(address)}: ${why}`);
    this.name = new.target.name;
  }
}

/**
 * Delays between retries of a call, and between rounds of asking the known
 * curators: 50 ms doubling to 1 s, each ±50 %. The jitter matters: after a
 * leader fails, every node of the cluster retries at once, and without it
 * they would keep arriving at the curators in lockstep.
 */
const retryBackoff = resolveBackoff({ initialMs: 50, multiplier: 2, maxMs: 1000, jitter: 0.5 });

/**
 * How long a curator given up as the leader is not taken back as the leader
 * (a curator naming it is waited past meanwhile, as for a failed leader:
 * see CuratorConnection's `askLeader`): 100 ms the first time, doubling to
 * 2 s each time it is given up again, until a call on it succeeds. A leader
 * being fenced (its lease deadline passed, its node and curator reachable:
 * a gray failure) answers "not the leader" at once, while the other
 * curators still name it until its election key expires: without a floor,
 * a client went back to it as fast as its calls retried, dozens of times a
 * second for seconds, each time also connecting anew where the leader's
 * connection was its own (an operator's). Each delay is stretched by up to
 * half, at random: a cluster's nodes refused at once come back apart.
 */
const candidateBackoff = { initialMs: 100, maxMs: 2000, jitter: 0.5 };

/**
 * While no curator asked has answered, another is asked this often (the
 * earlier questions stand): see findLeader.
 */
const hedgeAfterMs = 3000;

/**
 * Every client waiting past a failed leader hears of the new one at the same
 * moment (the curators announce it on their streams at once); each waits a
 * random part of this before dialling it, so that the new leader meets its
 * cluster's nodes over two seconds rather than in one burst of TLS
 * handshakes (which overflowed its accept queue in the scale simulator).
 */
const newLeaderSpreadMs = 2000;

/**
 * Why a search's own questions and probes are withdrawn once it has its
 * answer. Given, so that abort() does not build its default DOMException
 * (tens of µs each in Node 20, two per node and search at a failover); it
 * reaches no caller: the withdrawn questions' rejections are dropped.
 */
const roundOver = new Error("the search for the leader has its answer");

/** How long a standby connection's introduction waits for its answer (see introduce). */
const introductionTimeoutMs = 10_000;

/**
 * Asks a curator once, over a standby connection just made, who leads, and
 * withdraws the question at the first answer (or its failure: nothing
 * depends on it). The curator learns who is on the other end of the
 * connection, ahead of leading (curator-local.ts `onCaller`, identity.ts
 * `IdentityCache.learn`): a standby connection carries no call until a
 * failover, and a node asks only one curator who leads then, so a new
 * leader knew about half the cluster. In a profile of a 5,000-node failover
 * in the scale simulator it spent 8 % of its CPU reading certificates off
 * sockets (and more verifying them): three fifths learning the nodes that
 * had asked it, one per turn of its loop, into its first seconds as leader,
 * two fifths on the first calls of the nodes that had not. It also proves
 * the curator answers on the connection, which a connection's being READY
 * (TLS and HTTP/2) does not.
 */
function introduce(local: curatorProto.CuratorLocalClient): void {
  const stream = question(local);
  // A timer of its own, not a grpc-js deadline (a wall-clock time).
  const timer = setTimeout(() => withdraw(stream), introductionTimeoutMs);
  timer.unref();
  const done = () => {
    clearTimeout(timer);
    withdraw(stream);
  };
  stream.once("data", done);
  stream.once("error", done);
  stream.once("end", done);
}

/**
 * Asks `local` who leads: a GetCurrentLeader stream, made without the
 * caller's stack that grpc-js keeps for an error status (a question is
 * withdrawn whenever another answer comes first, and grpc-js would format
 * that stack for nobody), and withdrawn quietly (quiet-cancel.ts). No grpc-js
 * deadline: its timer fires before the answers read in the same turn of the
 * loop (see askLeader), and it is a wall-clock time.
 */
function question(
  local: curatorProto.CuratorLocalClient,
): ClientReadableStream<curatorProto.GetCurrentLeaderResponse> {
  return withoutStackTrace(() =>
    local.getCurrentLeader({}, { interceptors: [quietCancel, stacklessStatus] }),
  );
}

/**
 * Withdraws a question who leads that has its answer, or is no longer
 * wanted: nothing listens to it any more, and a status it ends with (the
 * cancel's, or one already on its way) is dropped.
 */
function withdraw(stream: ClientReadableStream<curatorProto.GetCurrentLeaderResponse>): void {
  stream.removeAllListeners();
  stream.on("error", () => undefined);
  stream.cancel();
}

/** The longest a connection to a curator waits between reconnects (grpc-js: 120 s). */
const maxReconnectBackoffMs = 5000;

/** The gRPC status code a failure carries, if any. */
const codeOf = (e: unknown): unknown =>
  typeof e === "object" && e !== null && "code" in e ? e.code : undefined;

/** Whether `e` failed with one of `codes`. */
const failedWith = (e: unknown, ...codes: status[]) => codes.some((code) => code === codeOf(e));

// UNIMPLEMENTED: a follower answered a leader-only method — the leader moved (or its key is stale).
const isRetryable = (e: unknown) =>
  failedWith(e, status.UNAVAILABLE, status.CANCELLED, status.UNIMPLEMENTED);

/**
 * How a failed call or stream on the leader gives it up: `refused` when the
 * curator answered, but not as the leader ("not the leader", an UNAVAILABLE
 * of its own, or UNIMPLEMENTED), `unreachable` when the call failed
 * otherwise as unavailable (the connection failed, or the curator could not
 * serve it), undefined when the failure says nothing of the leader. "Not
 * the leader" was taken as unreachable, and the address taken back at the
 * next successful connection: a fenced leader, reachable, was dialled again
 * and again (see {@link candidateBackoff}).
 */
function lossOf(e: unknown): LeaderLoss | undefined {
  if (notTheLeaderAnswer(e) !== undefined || failedWith(e, status.UNIMPLEMENTED)) return "refused";
  if (failedWith(e, status.UNAVAILABLE, status.CANCELLED)) return "unreachable";
  return undefined;
}

/**
 * How Node's TLS (OpenSSL) words its refusals of a server's certificate: "self-signed
 * certificate in certificate chain", "unable to verify the first certificate", "unsuitable
 * certificate purpose", "certificate has expired"… Not every TLS failure ("socket
 * disconnected before secure TLS connection was established" is a curator restarting), nor
 * a node other than the one expected at an address (credentials.ts words that without
 * "certificate"): the same words @metropolis/cluster's enrolment dialling tells them by.
 */
const certificateRefusal = /certificate|self[- ]signed/i;

/** What a failed connection's gRPC status says went wrong (its details), or the error's message. */
function refusalOf(e: unknown): string {
  if (typeof e === "object" && e !== null && "details" in e && typeof e.details === "string")
    return e.details.replace(/\s*Resolution note:\s*$/, "");
  return e instanceof Error ? e.message : String(e);
}

/**
 * Whether `e` is a connection to a curator that failed because TLS refused
 * the curator's certificate: UNAVAILABLE (grpc-js' status of a connection
 * that could not be made), with OpenSSL's words for a certificate that did
 * not verify against the cluster CA. Retried like any unreachable curator.
 */
function isCertificateRefused(e: unknown): boolean {
  return failedWith(e, status.UNAVAILABLE) && certificateRefusal.test(refusalOf(e));
}

/** A call that ran out of time: the leader held it open without answering. */
const isUnanswered = (e: unknown) => failedWith(e, status.DEADLINE_EXCEEDED);

/**
 * A grpc-js failure that names no cause: the connection was still waiting
 * to reconnect (or connecting) when the call was made or ran out of time.
 */
const isCauseless = (e: unknown) =>
  e instanceof Error &&
  (e.message.includes("No connection established. Last error: null") ||
    e.message.includes("Waiting for LB pick"));

/** Calls a unary gRPC client method as a promise. */
export function unaryCall<Req, Res>(
  method: (req: Req, callback: (err: ServiceError | null, res: Res) => void) => unknown,
  request: Req,
): Promise<Res> {
  return new Promise((resolve, reject) =>
    method(request, (err, res) => (err ? reject(err) : resolve(res))),
  );
}

export class CuratorConnection {
  private readonly ca: string;
  private readonly identity: { cert: string; key: string } | undefined;
  /** Client credentials by the node expected at the other end ("" for any node). */
  private readonly credentials = new Map<string, ChannelCredentials>();
  /** The TLS context all of them share (made on first use). */
  private context: SecureContext | undefined;
  private readonly channelOptions: ChannelOptions;
  private readonly endpoints: CuratorAddress[];
  private current: LeaderClients | undefined;
  /** Aborts the current leader's `dropped` signal (see dropLeader). */
  private currentDrop: AbortController | undefined;
  /** The search for the leader under way, shared by its callers (see leaderClients), and its deadline. */
  private search: { found: Promise<LeaderClients>; deadline: number } | undefined;
  /** Aborted by close(): ends the search under way, which no caller may wait for any more. */
  private closing = new AbortController();
  /** The leader last given up (it failed, or stopped answering), and how; until another is found. */
  private failedLeader: { endpoint: CuratorEndpoint; loss: LeaderLoss } | undefined;
  /**
   * Curators given up as the leader, by {@link localKey}: not taken back as
   * the leader before `until` (monotonic ms); `delayMs` is the backoff's
   * last delay, doubled the next time (see {@link candidateBackoff}).
   * Forgotten when a call on the curator succeeds.
   */
  private readonly setBack = new Map<string, { until: number; delayMs: number }>();
  /**
   * The leader named by the last "not the leader" answer of the leader given
   * up: the next search goes there without asking the curators (see
   * connectLeader).
   */
  private hint: CuratorEndpoint | undefined;
  /**
   * The leader whose clients were current last; whether its channel was
   * closed when it was given up; and the channel, when it refused and the
   * channel is kept for it meanwhile (see connectLeader, dropLeader).
   */
  private lastLeader:
    { endpoint: CuratorEndpoint; channelRetired: boolean; held?: ChannelInterface } | undefined;
  /**
   * CuratorLocal clients of the curators asked, by address: kept, so that
   * asking again reuses the connection instead of making a TLS handshake
   * each time (a cluster's nodes all ask at once after a failover).
   */
  private readonly locals = new Map<string, curatorProto.CuratorLocalClient>();
  /** Channels by address and expected node, with how many clients use each (see acquireChannel). */
  private readonly channels = new Map<string, { channel: ChannelInterface; users: number }>();
  private readonly standby: { spreadMs: number } | undefined;
  private readonly giveUpOnDeadline: boolean;
  /** Standby channels followed by keepConnected. */
  private readonly kept = new WeakSet<ChannelInterface>();
  /** When the standby connections are opened next (see `standby`). */
  private standbyTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(opts: CuratorConnectionOptions) {
    if (opts.endpoints.length === 0)
      throw new RangeError("CuratorConnection needs at least one curator endpoint");
    this.endpoints = [...opts.endpoints];
    this.standby = opts.standby;
    this.giveUpOnDeadline = opts.giveUpOnDeadline ?? true;
    this.ca = opts.ca;
    this.identity = opts.identity;
    const keepalive = opts.keepalive ?? defaultCuratorKeepalive;
    this.channelOptions = {
      "grpc.keepalive_time_ms": keepalive.timeMs,
      "grpc.keepalive_timeout_ms": keepalive.timeoutMs,
      // grpc-js waits up to 120 s between reconnects of a connection that
      // keeps failing, and every client of the same address shares it. A
      // curator's port is closed for a moment while it changes from
      // follower to leader, and a cluster's nodes all dial it then: each
      // failure grew the wait, and nodes sat in it for minutes after the new
      // leader served (seen in the scale simulator at 2,500 nodes).
      "grpc.max_reconnect_backoff_ms": maxReconnectBackoffMs,
      "grpc.use_local_subchannel_pool": 1,
      // grpc-js' channelz (its introspection service) keeps a trace of every
      // channel's and connection's state changes and counts every call, in
      // a registry of the whole process; nothing here serves it. In the
      // scale simulator's node hosts it was 3 % of their CPU in the seconds
      // after a leader failed (every node's connections changing state).
      "grpc.enable_channelz": 0,
      // A standby connection carries no calls: it must not be closed as idle
      // after grpc-js' 30 minutes (the longest timer Node keeps: ~24.8 days).
      ...(this.standby && { "grpc.client_idle_timeout_ms": 2 ** 31 - 1 }),
    };
  }

  /**
   * Runs `fn` against the current leader. When it fails because the leader is
   * unavailable, finds the leader again and retries, until `timeoutMs`
   * (default 30 s) has passed; other errors are returned as they are. An
   * aborted `signal` ends the call at once, also while the leader is sought.
   */
  async call<T>(
    fn: (leader: LeaderClients) => Promise<T>,
    opts: { timeoutMs?: number; signal?: AbortSignal } = {},
  ): Promise<T> {
    const deadline = now() + (opts.timeoutMs ?? 30_000);
    const backoff = new Backoff(retryBackoff);
    let cause: unknown;
    for (;;) {
      opts.signal?.throwIfAborted();
      let leader: LeaderClients | undefined;
      try {
        leader = await this.leaderClients(deadline, opts.signal);
        const result = await fn(leader);
        // It answered as the leader: a backoff it had is over.
        this.setBack.delete(localKey(leader.endpoint));
        return result;
      } catch (e) {
        opts.signal?.throwIfAborted();
        // grpc-js answers a retry on a connection still in reconnect backoff
        // with "No connection established" and no cause; the attempt that
        // broke it said why (a refused certificate, say), and that is what
        // the caller is told when the call gives up.
        // Likewise a search that found no other leader in the time left after
        // the leader's call failed: the call failed for the leader's reason
        // (the curators' "still that one" is no news).
        if (e instanceof NoLeaderError && cause !== undefined) throw this.atDeadline(cause);
        if (cause === undefined || !isCauseless(e)) cause = e;
        const delay = backoff.next();
        if (!isRetryable(e)) {
          if (leader && this.giveUpOnDeadline && isUnanswered(e))
            this.dropLeader(leader, "unresponsive", e);
          throw e;
        }
        // Forgotten whether or not this call has time left to retry: the next
        // call must not go to it again. It was forgotten only before a retry,
        // and a leader that hangs (its port accepting connections, its TLS
        // never answering) fails each call only after the call's deadline:
        // every later call went to it again (an owner's client polling every
        // 5 s stayed on a frozen leader for minutes in the scale simulator).
        if (leader) this.giveUp(leader, e);
        if (now() + delay > deadline) throw this.atDeadline(cause);
        await abortableSleep(delay, opts.signal);
      }
    }
  }

  /**
   * What a call that gives up at its deadline throws for `cause`, its
   * failure: {@link CuratorCertificateNotVerifiedError} for a curator whose
   * certificate TLS refused (else the caller read a bare UNAVAILABLE, as if
   * nothing answered there), `cause` itself otherwise.
   */
  private atDeadline(cause: unknown): unknown {
    return isCertificateRefused(cause)
      ? new CuratorCertificateNotVerifiedError(this.endpoints, cause)
      : cause;
  }

  /**
   * Tells the connection that a call to `leader` failed after it had begun:
   * a stream it had answered on broke (a failed leader resets every stream of
   * every node at once). With a status that says the leader is unavailable,
   * the connection forgets it, as a failed call would make it, so that the
   * next call looks for the leader at once instead of failing first at the
   * one that is gone (one call and a connection attempt per worker of every
   * node, all in the seconds before a new leader is elected). Other
   * failures, or a leader already replaced, are ignored.
   */
  leaderFailed(leader: LeaderClients, error: unknown): void {
    if (isRetryable(error)) this.giveUp(leader, error);
  }

  /**
   * Tells the connection that `leader` held a call open without answering
   * in time: a heartbeat's answer, due within the curator's own heartbeat
   * timeout, did not come. A leader whose process hangs, or whose machine
   * is cut off without its connections being reset, keeps them open and
   * READY, so that nothing else notices it before the HTTP/2 keepalive
   * (see {@link defaultCuratorKeepalive}). The connection forgets it, every
   * stream on it ends (`dropped`), and the search for the leader waits past
   * answers that still name it until the curators name another (once its
   * lease has expired) or it answers a question itself (it was only slow).
   */
  leaderUnresponsive(leader: LeaderClients, error: unknown): void {
    this.dropLeader(leader, "unresponsive", error);
  }

  /** The curators asked where the leader is. */
  get knownEndpoints(): readonly CuratorAddress[] {
    return this.endpoints;
  }

  /**
   * Replaces the curators asked where the leader is (an empty list is
   * ignored: some curator is better than none). The endpoints a connection
   * starts with are those of its enrolment; as consensus members come and
   * go they can all be gone, so nodes keep the list current from the
   * cluster's view (roleserve's directory worker). The current leader, if
   * any, stays in use.
   */
  setEndpoints(endpoints: readonly CuratorAddress[]): void {
    if (endpoints.length === 0) return;
    this.endpoints.splice(0, this.endpoints.length, ...endpoints);
    // Curators no longer listed are not asked again: let their connections go.
    const listed = new Set(endpoints.map(localKey));
    for (const [key, local] of this.locals) {
      if (listed.has(key)) continue;
      this.releaseChannel(local.getChannel());
      this.locals.delete(key);
    }
    this.scheduleStandby();
  }

  /** The current leader, asking the known curators if needed. */
  async leader(timeoutMs = 30_000): Promise<CuratorEndpoint> {
    return (await this.leaderClients(now() + timeoutMs)).endpoint;
  }

  /**
   * Closes every connection (a search for the leader under way ends with
   * CuratorConnectionClosedError). A later call connects anew.
   */
  close(): void {
    clearTimeout(this.standbyTimer);
    this.standbyTimer = undefined;
    this.closing.abort(new CuratorConnectionClosedError());
    this.closing = new AbortController();
    if (this.current) this.dropLeader(this.current, "replaced", new CuratorConnectionClosedError());
    this.failedLeader = undefined;
    this.hint = undefined;
    this.setBack.clear();
    if (this.lastLeader?.held) this.releaseChannel(this.lastLeader.held);
    this.lastLeader = undefined;
    for (const local of this.locals.values()) this.releaseChannel(local.getChannel());
    this.locals.clear();
  }

  /**
   * The current leader's clients, found if need be. One search at a time,
   * shared by every caller: a node's workers all start (and all lose the
   * leader) at once, and each searching on its own multiplied a cluster's
   * questions to the curators, and its connections to the leader, by the
   * workers per node (seen in the scale simulator).
   *
   * The search runs to the deadline of the caller that began it. A caller
   * with less time waits for it only until its own deadline, and is then
   * told so ({@link LeaderSearchTimeoutError}): it waited out the whole
   * search (up to 30 s) before, whatever its own time. A caller with more
   * time searches again when the search ends without a leader.
   */
  private async leaderClients(deadline: number, signal?: AbortSignal): Promise<LeaderClients> {
    const since = now();
    for (;;) {
      if (this.current) return this.current;
      if (!this.search) {
        const found = this.connectLeader(deadline).finally(() => (this.search = undefined));
        this.search = { found, deadline };
      }
      const search = this.search;
      try {
        return await (deadline < search.deadline
          ? this.untilOwnDeadline(search.found, deadline, since, signal)
          : signal
            ? abortable(search.found, signal)
            : search.found);
      } catch (e) {
        signal?.throwIfAborted();
        if (e instanceof LeaderSearchTimeoutError) throw e;
        // The search ran to an earlier caller's deadline: this caller's is later.
        if (now() >= deadline || e instanceof CuratorConnectionClosedError) throw e;
      }
    }
  }

  /**
   * `found`, or LeaderSearchTimeoutError at `deadline` (the caller's, who
   * called at `since`), or the reason of `signal`. The deadline fires after
   * the reads of its turn of the loop (answerDeadline): a leader found by
   * then wins.
   */
  private untilOwnDeadline(
    found: Promise<LeaderClients>,
    deadline: number,
    since: number,
    signal: AbortSignal | undefined,
  ): Promise<LeaderClients> {
    const endpoints = [...this.endpoints];
    const timeout = answerDeadline(
      Math.max(0, deadline - now()),
      () => new LeaderSearchTimeoutError(endpoints, deadline - since),
      signal,
    );
    return abortable(found, timeout.signal).finally(() => timeout.clear());
  }

  /**
   * Finds the leader (until `deadline`, or until closed) and makes its
   * clients current: the leader a "not the leader" answer named, when there
   * is one and it is not set back, else the curators' answer.
   *
   * When it is another curator than the last leader, the connection to the
   * last leader is closed (unless it was already, when it was given up: see
   * dropLeader) and made anew at its next use, rather than kept: a
   * connection kept through a network fault can stay READY in grpc-js
   * without a TCP connection behind it (its curator restarted while cut
   * off), until the HTTP/2 keepalive gives up (30 s + 20 s for a node), and
   * the client's streams there got no first message when that curator led
   * again (e2e partition-faults, scenario 4).
   */
  private async connectLeader(deadline: number): Promise<LeaderClients> {
    const hinted = this.hint;
    this.hint = undefined;
    const endpoint =
      hinted !== undefined && this.waitBeforeTaking(hinted) === 0
        ? hinted
        : await this.findLeader(deadline, this.closing.signal);
    this.failedLeader = undefined;
    const address = formatCuratorAddress(endpoint);
    if (!this.endpoints.some((e) => sameAddress(e, endpoint))) this.endpoints.push(endpoint);
    // The leader a verified curator named: only its own certificate is accepted.
    const channel = this.acquireChannel(address, endpoint.nodeId);
    const last = this.lastLeader;
    // Acquired above first: taken back, the refusing leader's kept channel serves on.
    if (last?.held) this.releaseChannel(last.held);
    if (last !== undefined && !last.channelRetired && !sameAddress(last.endpoint, endpoint))
      this.retireChannel(last.endpoint);
    this.lastLeader = { endpoint, channelRetired: false };
    const credentials = this.credentialsFor(endpoint.nodeId);
    // Errors of failed calls without grpc-js' own frames (stackless-status.ts).
    const options = { channelOverride: channel, interceptors: [stacklessStatus] };
    this.currentDrop = new AbortController();
    this.current = {
      endpoint,
      curator: new curatorProto.CuratorClient(address, credentials, options),
      management: new api.ManagementClient(address, credentials, options),
      aaa: new api.AAAClient(address, credentials, options),
      dropped: this.currentDrop.signal,
    };
    this.scheduleStandby();
    return this.current;
  }

  /** Opens the standby connections (see `standby`) a random part of its spread from now, unless already due. */
  private scheduleStandby(): void {
    if (!this.standby || this.standbyTimer) return;
    this.standbyTimer = setTimeout(() => {
      this.standbyTimer = undefined;
      for (const curator of this.endpoints) {
        // Only a curator bound to its node: a bare address is an operator's.
        if (curator.nodeId === undefined) continue;
        this.keepConnected(curator);
      }
    }, Math.random() * this.standby.spreadMs);
    this.standbyTimer.unref();
  }

  /**
   * Connects to `curator` (a standby connection) and connects again
   * whenever the connection drops — its curator restarted, say — a random
   * part of the spread later, until it is closed. Without this a restarted
   * curator got no standby connections back, and at the next failover the
   * nodes that asked it first each made a TLS handshake there at the same
   * moment (the scale simulator's second failover: 5,000 nodes found no
   * leader for 40 s).
   *
   * Each time the connection is made, the curator is asked once who leads
   * (see {@link introduce}).
   */
  private keepConnected(curator: CuratorAddress): void {
    const local = this.localClient(curator);
    const channel = local.getChannel();
    if (this.kept.has(channel)) {
      channel.getConnectivityState(true);
      return;
    }
    this.kept.add(channel);
    const spreadMs = this.standby?.spreadMs ?? 0;
    const follow = () => {
      const state = channel.getConnectivityState(true);
      if (state === connectivityState.SHUTDOWN) return;
      if (state === connectivityState.READY) introduce(local);
      // No deadline: grpc-js then sets no timer (a finite one kept whole
      // processes alive with nothing else to do). Ends with the channel.
      channel.watchConnectivityState(state, Infinity, () => {
        if (channel.getConnectivityState(false) !== connectivityState.IDLE) return follow();
        setTimeout(follow, Math.random() * spreadMs).unref();
      });
    };
    follow();
  }

  /** Credentials that accept only node `nodeId`'s certificate (any node's when undefined). */
  private credentialsFor(nodeId: string | undefined): ChannelCredentials {
    const key = nodeId ?? "";
    let credentials = this.credentials.get(key);
    if (!credentials) {
      this.context ??= curatorClientContext(this.ca, this.identity);
      credentials = curatorClientCredentials(this.ca, this.identity, {
        nodeId,
        context: this.context,
      });
      this.credentials.set(key, credentials);
    }
    return credentials;
  }

  /**
   * Forgets `leader`, if it is still the current one, and aborts its
   * `dropped` signal with `reason`. Unless it was `replaced` (it answered,
   * but not as the leader: still starting, or stepped down; it is simply
   * asked about again), an answer naming it again is waited past (see
   * askLeader).
   *
   * A leader already forgotten (or replaced) is left alone: a node's workers
   * all fail at a failover, one after the other, and the second failure
   * forgetting "the current leader" again cleared what the first had noted,
   * that the failed leader is gone — the search then took the curators'
   * first answer (still naming the failed leader, until its lease expires)
   * and dialled it once more.
   */
  private dropLeader(leader: LeaderClients, loss: LeaderLoss, reason: unknown): void {
    if (this.current !== leader) return;
    this.current = undefined;
    this.failedLeader = loss === "replaced" ? undefined : { endpoint: leader.endpoint, loss };
    this.currentDrop?.abort(reason);
    this.currentDrop = undefined;
    // Its three clients share one channel (closing a client would close it).
    // Kept for a leader that refused (see below): released when the next
    // leader's clients are made. Released at once, an operator's client,
    // which holds no other use of it, connected anew each time the search
    // took that curator back.
    const channel = leader.curator.getChannel();
    const last = this.lastLeader;
    if (loss === "refused" && last && sameAddress(last.endpoint, leader.endpoint) && !last.held)
      last.held = channel;
    else this.releaseChannel(channel);
    if (loss === "replaced") return;
    this.setBackCandidate(leader.endpoint);
    // A connection that failed, or held a call without answering, may be
    // READY with no TCP connection behind it (a host cut off whose curator
    // restarted meanwhile): it is closed, so that every later use — the
    // search's proof that the leader is back included — connects anew
    // (see connectLeader). One that answered "not the leader" is alive: it
    // is kept while the search may take that curator back (closing it would
    // make each retry a TLS handshake), and closed once another leads.
    if (loss !== "refused") {
      this.retireChannel(leader.endpoint);
      if (this.lastLeader && sameAddress(this.lastLeader.endpoint, leader.endpoint))
        this.lastLeader.channelRetired = true;
    }
  }

  /**
   * Gives `leader` up after a call or stream on it failed with `error`, as
   * {@link lossOf} says; follows the leader its "not the leader" answer
   * names, if any (see connectLeader).
   */
  private giveUp(leader: LeaderClients, error: unknown): void {
    const loss = lossOf(error) ?? "replaced";
    if (this.current !== leader) return;
    this.dropLeader(leader, loss, error);
    const named = notTheLeaderAnswer(error)?.leader;
    if (
      named !== undefined &&
      leaderProblem(named) === undefined &&
      !sameAddress(named, leader.endpoint)
    ) {
      // Bound to the node the leader named, as an answer of a curator is.
      this.hint = named;
    }
  }

  /**
   * Sets `curator` back as a candidate for leader (see
   * {@link candidateBackoff}): the next delay, twice the last one.
   */
  private setBackCandidate(curator: CuratorAddress): void {
    const key = localKey(curator);
    const last = this.setBack.get(key);
    const delayMs =
      last === undefined
        ? candidateBackoff.initialMs
        : Math.min(2 * last.delayMs, candidateBackoff.maxMs);
    const stretched = delayMs * (1 + candidateBackoff.jitter * Math.random());
    this.setBack.set(key, { until: now() + stretched, delayMs });
  }

  /** How long `curator` is still set back as a candidate for leader, in ms (0: not). */
  private waitBeforeTaking(curator: CuratorAddress): number {
    const setBack = this.setBack.get(localKey(curator));
    return setBack === undefined ? 0 : Math.max(0, setBack.until - now());
  }

  /**
   * Closes the channel to `curator` (bound to its node) and forgets it and
   * the CuratorLocal client on it, so that its next use connects anew.
   * Calls still on it end with it; a standby connection to the curator is
   * made again on a new channel (scheduleStandby).
   */
  private retireChannel(curator: CuratorAddress): void {
    this.locals.delete(localKey(curator));
    const key = channelKey(formatCuratorAddress(curator), curator.nodeId);
    const shared = this.channels.get(key);
    if (shared === undefined) return;
    this.channels.delete(key);
    shared.channel.close();
    this.scheduleStandby();
  }

  /**
   * Asks the known curators who leads, until one names a leader or the
   * deadline passes. One curator is asked first (each client starts at
   * another, so that a cluster's nodes spread their questions, and the
   * leader that just failed is asked last: see askingOrder); while it has
   * not answered, one more is asked every {@link hedgeAfterMs}, the earlier
   * questions still standing, and the first usable answer wins. A curator
   * that is slow to answer is not given up on: after a failover or at a
   * cold start, a curator admits its clients' connections a few at a time
   * (connection-admission.ts), and a client that gave up on one after a few
   * seconds to ask the next made a new connection there too, multiplying
   * the curators' handshakes (5,000 simulated nodes never got an answer that
   * way); and a frozen curator costs {@link hedgeAfterMs}, not its whole wait.
   * When every curator has failed, they are asked again after a backoff.
   */
  private async findLeader(deadline: number, signal?: AbortSignal): Promise<CuratorEndpoint> {
    let lastError: unknown = new Error("no curator answered");
    let answered = false;
    const backoff = new Backoff(retryBackoff);
    while (now() < deadline) {
      signal?.throwIfAborted();
      const order = askingOrder(this.endpoints, this.failedLeader?.endpoint);
      const round = new AbortController();
      const asking = signal ? AbortSignal.any([signal, round.signal]) : round.signal;
      try {
        return await new Promise<CuratorEndpoint>((resolve, reject) => {
          let next = 0;
          let pending = 0;
          const fail = (e: unknown) => {
            pending--;
            // Keep the error that says why (a refused certificate, say) over a
            // later one of the same connection still reconnecting.
            if (!answered || !isCauseless(e)) lastError = e;
            answered = true;
            if (!ask() && pending === 0) reject(lastError);
          };
          const ask = (): boolean => {
            const curator = order[next++];
            if (curator === undefined || asking.aborted) return false;
            pending++;
            // A curator that answered, if only with the failed leader, is
            // not slow: no other is asked meanwhile (5,000 nodes would each
            // hold a stream at every curator through a failover).
            this.askLeader(curator, deadline, asking, stopHedging).then(resolve, fail);
            return true;
          };
          // Another curator is asked only after the reads of the loop
          // iteration the hedge's timer fired in, as a deadline is (see
          // answerDeadline): a process running late meets its overdue
          // timers before the answers in its sockets, and the scale
          // simulator's node hosts, seconds late after a failover, asked
          // the next curator for nearly every node whose first answer had
          // come — a second stream per node for the surviving curators to
          // serve and tell of the new leader, and for the node to withdraw.
          let hedging = true;
          const stopHedging = () => {
            hedging = false;
            clearInterval(hedge);
          };
          const hedge = setInterval(
            () => setImmediate(() => hedging && !ask() && stopHedging()),
            hedgeAfterMs,
          );
          asking.addEventListener("abort", stopHedging, { once: true });
          ask();
        });
      } catch (e) {
        signal?.throwIfAborted();
        lastError = e;
      } finally {
        // The other questions still standing are withdrawn.
        round.abort(roundOver);
      }
      await abortableSleep(backoff.next(), signal);
    }
    throw isCertificateRefused(lastError)
      ? new CuratorCertificateNotVerifiedError(this.endpoints, lastError)
      : new NoLeaderError(this.endpoints, lastError);
  }

  /**
   * Asks `curator` who leads. An answer naming the leader that just failed is
   * waited past, on the same stream, until the curator names another (it
   * does once a new leader is elected: when the failed one's lease expires,
   * 10 s by default) or the failed leader is back: its backoff is over
   * (see {@link candidateBackoff}: a leader that answered "not the leader"
   * needs nothing more) and it can be reached again over a new connection
   * (it was a blip, or the same node restarted and leads again: a one-node
   * cluster after a reboot, whose curator, asked, names itself over the
   * connection that just answered), or, when it was given up as
   * unresponsive, it answers a question. An answer naming any other curator
   * still set back (given up before) is waited past until its backoff is over.
   * It was waited past for one second only: every node then dialled the
   * dead leader and asked again about once a second for the whole lease,
   * and 5,000 simulated nodes asking that way kept the surviving curators —
   * the one about to lead among them — busy answering. When the deadline
   * comes first, the question fails: the failed leader is not an answer.
   */
  private askLeader(
    curator: CuratorAddress,
    deadline: number,
    signal?: AbortSignal,
    /** Called at the curator's first answer, whatever it is. */
    onAnswer: () => void = () => undefined,
  ): Promise<CuratorEndpoint> {
    const local = this.localClient(curator);
    return new Promise<CuratorEndpoint>((resolve, reject) => {
      // No grpc-js deadline: its timer fires before this process reads the
      // answers that reached it meanwhile (see answerDeadline), and in the
      // scale simulator hundreds of nodes, whose hosts ran seconds late
      // after a failover, lost questions answered seconds before their
      // deadline that way, then started their search over from the back.
      const stream = question(local);
      /** The leader named first, waited past, and why. */
      let stale: { named: CuratorEndpoint; why: string } | undefined;
      /** Ends the watch of a failed leader (see untilTakeable); made when one starts. */
      let probing: AbortController | undefined;
      const askedAt = now();
      const timeout = answerDeadline(
        deadline - askedAt,
        () => new UnansweredLeaderQuestionError(curator, now() - askedAt),
      );
      // Waiting past the failed leader, the curator never named another,
      // and the failed one did not come back: nothing to dial. It used to be
      // taken as this curator's last word, and a leader that hangs (its port
      // accepting connections whose TLS handshake never ends: grpc-js sets
      // no timeout on it) then held every call made there without a
      // deadline of its own for good.
      const stillFailed = (waited: { named: CuratorEndpoint; why: string }) =>
        new UnusableLeaderAnswerError(
          curator,
          `still names leader ${waited.named.nodeId}, given up as ${waited.why} and not back`,
        );
      const onTimeout = () =>
        finish(() => reject(stale ? stillFailed(stale) : timeout.signal.reason));
      timeout.signal.addEventListener("abort", onTimeout, { once: true });
      const onAbort = () => finish(() => reject(signal?.reason));
      signal?.addEventListener("abort", onAbort, { once: true });
      const finish = (result: () => void) => {
        probing?.abort(roundOver);
        timeout.clear();
        timeout.signal.removeEventListener("abort", onTimeout);
        signal?.removeEventListener("abort", onAbort);
        withdraw(stream);
        result();
      };
      stream.on("data", (res: curatorProto.GetCurrentLeaderResponse) => {
        onAnswer();
        const problem = leaderAnswerProblem(curator, res);
        if (problem !== undefined) {
          finish(() => reject(new UnusableLeaderAnswerError(curator, problem)));
          return;
        }
        const named = { nodeId: res.leaderNodeId, host: res.leaderHost, port: res.leaderPort };
        if (stale === undefined) {
          probing = new AbortController();
          const waiting = this.untilTakeable(named, probing.signal);
          if (waiting === undefined) {
            finish(() => resolve(named));
            return;
          }
          // Probably the curator does not know yet; wait for it to say otherwise.
          stale = { named, why: waiting.why };
          waiting.back.then(
            () => finish(() => resolve(named)),
            () => undefined, // given up with the question, or the deadline: the stream says
          );
          return;
        }
        // A new leader, broadcast to every client waiting past the old one at
        // the same moment: each dials it after a random part of the spread.
        finish(() => {
          abortableSleep(Math.random() * newLeaderSpreadMs, signal).then(
            () => resolve(named),
            reject,
          );
        });
      });
      stream.once("error", (e) => finish(() => reject(stale ? stillFailed(stale) : e)));
      stream.once("end", () =>
        finish(() =>
          reject(
            stale
              ? stillFailed(stale)
              : new UnusableLeaderAnswerError(curator, "ended the leader stream without an answer"),
          ),
        ),
      );
    });
  }

  /**
   * What a search must wait for before it takes `named` as the leader
   * (undefined: nothing), and how that was given up (for its error): the
   * end of its backoff, if it is set back, and, if it is the leader that
   * failed last, the proof that it is back (see askLeader). Ends early,
   * rejecting, when `signal` aborts.
   */
  private untilTakeable(
    named: CuratorEndpoint,
    signal: AbortSignal,
  ): { back: Promise<void>; why: string } | undefined {
    const failed = this.failedLeader;
    const waitMs = this.waitBeforeTaking(named);
    const isFailed = failed !== undefined && sameAddress(named, failed.endpoint);
    if (!isFailed && waitMs === 0) return undefined;
    const backedOff = waitMs > 0 ? abortableSleep(waitMs, signal) : Promise.resolve();
    if (failed === undefined || !isFailed) return { back: backedOff, why: "set back" };
    const proof = () => {
      if (failed.loss === "unresponsive") return this.untilAnswers(failed.endpoint, signal);
      if (failed.loss === "unreachable") return this.untilReachable(failed.endpoint, signal);
      return undefined; // refused: it answered; its backoff is all
    };
    return { back: backedOff.then(proof), why: failed.loss };
  }

  /**
   * Resolves once a connection to `curator` is READY (connecting if need be:
   * the one kept to it, when there is one); rejects when `signal` aborts
   * (the question's deadline ends it so). A SIGKILLed leader's port refuses
   * connections and a hung one completes no handshake: neither resolves this.
   */
  private untilReachable(curator: CuratorEndpoint, signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.reject(signal.reason);
    // The channel of its CuratorLocal client, kept: the connection that
    // proves it reachable is the one its clients as the leader then use.
    // A channel of its own, closed once READY, made every return to the
    // leader two connections where it was not asked (an operator's client).
    const channel = this.localClient(curator).getChannel();
    return new Promise<void>((resolve, reject) => {
      let ended = false;
      // Ended at once when aborted: a pending watch below calls back only
      // at the next change of state.
      const end = (error?: unknown) => {
        if (ended) return;
        ended = true;
        signal.removeEventListener("abort", onAbort);
        if (error === undefined) resolve();
        else reject(error);
      };
      const onAbort = () => end(signal.reason);
      signal.addEventListener("abort", onAbort, { once: true });
      const check = (error?: Error) => {
        if (ended) return;
        const state = channel.getConnectivityState(true);
        if (state === connectivityState.READY) end();
        else if (error) end(error);
        // Closed under the watch (the curator no longer listed, or its
        // connection retired): grpc-js throws at a watch of a closed channel,
        // inside the close that called this back.
        else if (state === connectivityState.SHUTDOWN) end(new Error("its connection was closed"));
        // No deadline (a grpc-js deadline is a wall-clock time): ended by `signal`.
        else channel.watchConnectivityState(state, Infinity, check);
      };
      check();
    });
  }

  /**
   * Resolves once `curator` answers a question who leads, whatever it says:
   * proof that a curator given up as unresponsive (see leaderUnresponsive)
   * is answering again, which its connection, open and READY all along,
   * is not. Rejects when the question fails (its connection dropped after
   * all: the curators' answers decide) or `signal` aborts.
   */
  private untilAnswers(curator: CuratorEndpoint, signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.reject(signal.reason);
    const stream = question(this.localClient(curator));
    return new Promise<void>((resolve, reject) => {
      const end = (error?: unknown) => {
        signal.removeEventListener("abort", onAbort);
        withdraw(stream);
        if (error === undefined) resolve();
        else reject(error);
      };
      const onAbort = () => end(signal.reason);
      signal.addEventListener("abort", onAbort, { once: true });
      stream.once("data", () => end());
      stream.once("error", (e) => end(e));
      stream.once("end", () => end(new Error("ended the leader stream without an answer")));
    });
  }

  /**
   * The channel to `address` that accepts only node `nodeId`'s certificate,
   * shared by every client of this connection that needs it (the leader's
   * three, and the CuratorLocal client of the same curator): one TLS
   * connection per curator. Each channel has its own subchannel pool:
   * grpc-js' global pool is a list per address scanned on every new
   * connection, which a process holding many nodes' connections (the scale
   * simulator) turned into its hottest code. Released with {@link releaseChannel}.
   */
  private acquireChannel(address: string, nodeId: string | undefined): ChannelInterface {
    const key = channelKey(address, nodeId);
    let shared = this.channels.get(key);
    if (!shared) {
      shared = {
        channel: new Channel(address, this.credentialsFor(nodeId), this.channelOptions),
        users: 0,
      };
      this.channels.set(key, shared);
    }
    shared.users++;
    return shared.channel;
  }

  /** Gives up one use of `channel`; the last one closes it. */
  private releaseChannel(channel: ChannelInterface): void {
    for (const [key, shared] of this.channels) {
      if (shared.channel !== channel) continue;
      if (--shared.users > 0) return;
      this.channels.delete(key);
      shared.channel.close();
      return;
    }
  }

  /** The (kept) CuratorLocal client of `curator`. */
  private localClient(curator: CuratorAddress): curatorProto.CuratorLocalClient {
    const key = localKey(curator);
    let local = this.locals.get(key);
    if (!local) {
      const address = formatCuratorAddress(curator);
      local = new curatorProto.CuratorLocalClient(address, this.credentialsFor(curator.nodeId), {
        channelOverride: this.acquireChannel(address, curator.nodeId),
        interceptors: [stacklessStatus],
      });
      this.locals.set(key, local);
    }
    return local;
  }
}

/**
 * The order in which a search asks `endpoints` who leads: from a random one
 * on (so that a cluster's nodes spread their questions over the curators),
 * except that the leader that just failed, if it is one of them, comes last.
 * Asked first, it was a call that could only fail, on a connection busy
 * re-dialling it, before the next curator was asked: after a failover that
 * was a third of the cluster's nodes, each one's search the later for it.
 */
function askingOrder(
  endpoints: readonly CuratorAddress[],
  failed: CuratorAddress | undefined,
): CuratorAddress[] {
  const start = Math.floor(Math.random() * endpoints.length);
  const order = [...endpoints.slice(start), ...endpoints.slice(0, start)];
  if (failed === undefined) return order;
  return [
    ...order.filter((e) => !sameAddress(e, failed)),
    ...order.filter((e) => sameAddress(e, failed)),
  ];
}

/** Key of a channel (see acquireChannel): the address and the node expected there. */
const channelKey = (address: string, nodeId: string | undefined) => `${address}/${nodeId ?? ""}`;

/** Key of a curator's kept CuratorLocal client: its address and the node expected there. */
const localKey = (curator: CuratorAddress) =>
  `${formatCuratorAddress(curator)} ${curator.nodeId ?? ""}`;

function sameAddress(a: CuratorAddress, b: CuratorAddress): boolean {
  return a.host === b.host && a.port === b.port && a.nodeId === b.nodeId;
}

/** Why a GetCurrentLeader answer from `curator` cannot be followed, or undefined when it can. */
function leaderAnswerProblem(
  curator: CuratorAddress,
  res: curatorProto.GetCurrentLeaderResponse,
): string | undefined {
  if (curator.nodeId !== undefined && res.thisNodeId !== curator.nodeId) {
    return `answered as another node than ${curator.nodeId}`;
  }
  return leaderProblem({ nodeId: res.leaderNodeId, host: res.leaderHost, port: res.leaderPort });
}

/** Why a leader a curator named (in an answer, or a "not the leader" hint) cannot be dialled, or undefined. */
function leaderProblem(named: CuratorEndpoint): string | undefined {
  if (!isNodeId(named.nodeId)) {
    return "named a leader that is not a node ID";
  }
  if (isIP(named.host) === 0) {
    return `named leader ${named.nodeId} at an address that is not an IP address`;
  }
  if (!Number.isInteger(named.port) || named.port < 1 || named.port > 65535) {
    return `named leader ${named.nodeId} at port ${named.port}, not a TCP port`;
  }
  return undefined;
}
