/**
 * Routes the calls of one grpc-js server to the services of the run serving
 * now (a follower's, then a leader's, …), so that a curator changing role
 * keeps its clients' connections.
 *
 * A curator used to run a grpc-js server per role, and shutting the
 * follower's down to start the leader's closed every connection to it: each
 * node of the cluster, with a connection kept to every curator for exactly
 * this moment (CuratorConnection's `standby`), had to make a new TLS
 * handshake with the new leader, all of them at once. Here the server lives
 * as long as the listener, and each of its methods is a dispatcher:
 *
 *   call ──▶ dispatcher(path) ──▶ handler of the run serving now
 *                  │            ──▶ refused: the run's `admit` says no (a
 *                  │                leader whose lease deadline passed)
 *                  │            ──▶ the run's `notServed` answer: that run does
 *                  │                not serve it (a follower: UNAVAILABLE, "not
 *                  │                the leader", with the leader's address)
 *                  └─ no run serving (between two) ──▶ held for the next run
 *
 * When a run ends, its calls get {@link endGraceMs} to finish (a unary call
 * answers, a stream ends), then the rest are ended with UNAVAILABLE, as the
 * old server's shutdown ended them; a client retries, finding the new
 * leader. Calls held between runs are dispatched when the next run serves,
 * or answered UNAVAILABLE past {@link maxHeldCalls} or on close.
 */
import type { EventEmitter } from "node:events";
import {
  status,
  type Metadata,
  type sendUnaryData,
  type Server,
  type ServiceDefinition,
  type UntypedHandleCall,
  type UntypedServiceImplementation,
} from "@grpc/grpc-js";

/** A service definition with its implementation: what a run serves. */
export type ServiceEntry = readonly [ServiceDefinition, UntypedServiceImplementation];

/** A gRPC status a call is ended with, with trailing metadata if any. */
export interface CallRefusal {
  code: status;
  details: string;
  metadata?: Metadata;
}

/** How a run answers the calls it does not serve; see {@link CallRouter.serve}. */
export interface RunPolicy {
  /**
   * Services this run does not serve whose calls it answers with
   * `notServed` all the same (a follower: the leader's services), so that a
   * client hears why, not that the method does not exist.
   * @default none
   */
  unserved?: readonly ServiceDefinition[];
  /**
   * The answer to a call of a method this run does not serve.
   * @default UNIMPLEMENTED, as grpc-js answers
   */
  notServed?: (path: string) => CallRefusal;
  /**
   * Asked as each call arrives: a refusal ends the call with it instead of
   * dispatching it (a leader whose lease deadline passed, before the run ends).
   * @default every call admitted
   */
  admit?: (path: string) => CallRefusal | undefined;
}

/** Time a run's calls get to finish when the run ends. */
export const endGraceMs = 500;

/** Calls held while no run serves; beyond it the oldest is answered UNAVAILABLE. */
export const maxHeldCalls = 4096;

/** A grpc-js server call of any kind: each is an EventEmitter ('cancelled', 'finish', 'error'). */
type AnyCall = EventEmitter;

/** A method's handler as a service implementation provides it, and the object it belongs to. */
interface Handler {
  fn: UntypedHandleCall;
  self: UntypedServiceImplementation;
}

/** One call as the router sees it: how to end it, whether it has ended. */
interface RoutedCall {
  path: string;
  call: AnyCall;
  /** grpc-js' callback that answers a unary or client-streaming call (the router's, not the handler's). */
  callback: sendUnaryData<unknown> | undefined;
  ended: boolean;
}

/** A run's services, by method path, and its calls still running. */
class Run {
  readonly handlers = new Map<string, Handler>();
  constructor(readonly policy: RunPolicy) {}
  readonly calls = new Set<RoutedCall>();
  /** Called when the last of `calls` ends, while the run is ending. */
  onEmpty: (() => void) | undefined;

  /** `routed` has ended. */
  done(routed: RoutedCall): void {
    routed.ended = true;
    if (this.calls.delete(routed) && this.calls.size === 0) this.onEmpty?.();
  }
}

const unavailable = (details: string) => ({ code: status.UNAVAILABLE, details });

/** Ends `routed` with `error` (a gRPC status), however it answers. */
function endWith(routed: RoutedCall, error: CallRefusal): void {
  if (routed.ended) return;
  routed.ended = true;
  if (routed.callback) routed.callback(error);
  // A streaming response ends with the status of the error it is given.
  else routed.call.emit("error", error);
}

export class CallRouter {
  /** The run serving now, if any. */
  private current: Run | undefined;
  /** Calls that came while no run served, oldest first. */
  private held: RoutedCall[] = [];
  /** Service definitions whose methods have a dispatcher on the server. */
  private readonly routed = new Set<string>();
  private closed = false;

  constructor(private readonly server: Server) {}

  /**
   * Serves `services` from now until the returned function is called (which
   * ends the run: see the module comment; it resolves once the run's calls
   * have ended). Calls held since the previous run are dispatched now.
   * `policy` says how the run answers what it does not serve.
   */
  serve(services: readonly ServiceEntry[], policy: RunPolicy = {}): () => Promise<void> {
    const run = new Run(policy);
    for (const definition of policy.unserved ?? []) this.route(definition);
    for (const [definition, implementation] of services) {
      this.route(definition);
      for (const [name, method] of Object.entries(definition)) {
        const fn = implementation[name] ?? implementation[method.originalName ?? name];
        if (typeof fn === "function") run.handlers.set(method.path, { fn, self: implementation });
      }
    }
    this.current = run;
    const held = this.held;
    this.held = [];
    for (const routed of held) if (!routed.ended) this.dispatch(run, routed);
    return () => this.end(run);
  }

  /** Ends every held call (UNAVAILABLE); later calls are answered so too. */
  close(): void {
    this.closed = true;
    this.current = undefined;
    for (const routed of this.held) endWith(routed, unavailable("the curator is shutting down"));
    this.held = [];
  }

  /** Registers a dispatcher for each method of `definition`, once. */
  private route(definition: ServiceDefinition): void {
    const [first] = Object.values(definition);
    if (first === undefined || this.routed.has(first.path)) return;
    this.routed.add(first.path);
    const dispatchers: UntypedServiceImplementation = {};
    for (const [name, method] of Object.entries(definition)) {
      const callbacked = !method.responseStream;
      dispatchers[name] = callbacked
        ? (call: AnyCall, callback: sendUnaryData<unknown>) =>
            this.arrive({ path: method.path, call, callback, ended: false })
        : (call: AnyCall) =>
            this.arrive({ path: method.path, call, callback: undefined, ended: false });
    }
    this.server.addService(definition, dispatchers);
  }

  private arrive(routed: RoutedCall): void {
    if (this.closed) return endWith(routed, unavailable("the curator is shutting down"));
    if (this.current) return this.dispatch(this.current, routed);
    // Between two runs: the next one answers it.
    this.held.push(routed);
    routed.call.once("cancelled", () => (routed.ended = true));
    if (this.held.length > maxHeldCalls) {
      const oldest = this.held.shift();
      if (oldest) endWith(oldest, unavailable("the curator is changing role; retry"));
    }
  }

  private dispatch(run: Run, routed: RoutedCall): void {
    const handler = run.handlers.get(routed.path);
    if (!handler) {
      return endWith(
        routed,
        run.policy.notServed?.(routed.path) ?? {
          // What grpc-js answers for a method its server does not implement.
          code: status.UNIMPLEMENTED,
          details: `The server does not implement the method ${routed.path}`,
        },
      );
    }
    const refusal = run.policy.admit?.(routed.path);
    if (refusal) return endWith(routed, refusal);
    run.calls.add(routed);
    const done = () => run.done(routed);
    if (routed.callback) {
      // The handler answers through its own callback, so that an answer it
      // gives after the router ended the call is dropped; the router ends it
      // through `routed.callback`, which stays grpc-js' own. (Replacing
      // `routed.callback` with this guard dropped the router's UNAVAILABLE
      // too: a unary call still running when its run ended was never
      // answered, and its client waited out its deadline.)
      const callback = routed.callback;
      const answer: sendUnaryData<unknown> = (error, value, trailer, flags) => {
        if (routed.ended) return; // ended by the router already
        done();
        callback(error, value, trailer, flags);
      };
      Reflect.apply(handler.fn, handler.self, [routed.call, answer]);
    } else {
      for (const event of ["finish", "close", "cancelled"]) routed.call.once(event, done);
      Reflect.apply(handler.fn, handler.self, [routed.call]);
    }
  }

  /** Ends `run`: no new calls reach it; its calls get the grace, then UNAVAILABLE. */
  private async end(run: Run): Promise<void> {
    if (this.current === run) this.current = undefined;
    if (run.calls.size > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, endGraceMs);
        run.onEmpty = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    for (const routed of run.calls)
      endWith(routed, unavailable("this curator no longer serves in that role; retry"));
    run.calls.clear();
  }
}
