/**
 * The abort signal of one run (`ctx.signal`): an `AbortSignal` that costs a
 * tenth of Node's own.
 *
 * Why not `new AbortController().signal`: services wait on `ctx.signal`
 * (`addEventListener("abort", …)`, `events.once(signal, "abort")`, passing
 * it to child_process or fetch), so every run of every runnable makes one.
 * Node 20 builds each of its signals as an EventTarget whose prototype is
 * swapped afterwards, which gives every signal a hidden class of its own: 2.6 µs
 * to create, about 820 bytes that survive scavenges, 2 µs per listener and
 * 2–4 µs to abort. A supervised run cost no less than the bare
 * AbortController it carried, and a group restart of 100 siblings waited
 * 9–14 ms for the scavenges of their signals.
 *
 * A RunSignal is a small object of one shape (three fields: its reason, its
 * listeners — one on its own, more in an array — and what only onabort and
 * `AbortSignal.any()` need):
 *
 *     RunSignal.prototype ──▶ AbortSignal.prototype ──▶ EventTarget.prototype
 *     (aborted, reason, onabort, throwIfAborted, add/removeEventListener,
 *      dispatchEvent: all its own)
 *
 * so `signal instanceof AbortSignal` holds and everything in Node that takes a
 * signal accepts it (they check `"aborted" in signal` and then use the
 * public members). The one consumer that reaches into a signal's internals is
 * `AbortSignal.any()`: it registers the composite it makes in the source's
 * `kDependantSignals` set, which Node's own abort walks. A RunSignal keeps
 * that set on a real AbortController made only when `AbortSignal.any()` asks
 * for it, and aborts that controller when it aborts, so composites built on
 * `ctx.signal` abort with it.
 *
 * That relies on one internal of Node, so it is checked when this module
 * loads (a composite of a RunSignal must abort with it, with its reason, and
 * `events.addAbortListener` must be called); if the check fails, on a Node
 * whose internals differ, every run gets a plain AbortController's signal
 * instead: slower, never wrong. Two more keys of Node's are looked up once,
 * by their descriptions: the option with which Node's own listeners resist
 * `stopImmediatePropagation()`, and the field events.get/setMaxListeners
 * use (a RunSignal warns of too many listeners as Node's signals do).
 *
 * Differences from Node's AbortSignal that a caller could see, all outside
 * what services do with a run's signal: it has a `listeners(type)` method
 * (which `events.getEventListeners` asks instead of reading Node's private
 * listener list); listeners added with a weak-handler option
 * (`util.aborted`) are held strongly until the run ends; an event a caller
 * dispatches itself with `dispatchEvent` reaches the listeners with
 * `event.target` null.
 */
import { addAbortListener, defaultMaxListeners } from "node:events";
import { inspect } from "node:util";

// The DOM's listener types, which @types/node declares but does not export.
type Callback = Parameters<EventTarget["addEventListener"]>[1];
type AddOptions = Parameters<EventTarget["addEventListener"]>[2];
type RemoveOptions = Parameters<EventTarget["removeEventListener"]>[2];

/**
 * One `addEventListener`. Three fields, the options as bits: an idle run's
 * signal carries one of these, so its bytes count (see the module comment).
 */
interface Registration {
  readonly type: string;
  readonly callback: Callback;
  flags: number;
}
const capture = 1;
const once = 2;
/** Node's own listeners (events.once, addAbortListener) ignore stopImmediatePropagation. */
const resist = 4;
const removed = 8;

/** The abort event a RunSignal dispatches: targeted at it, as Node's is. */
class RunAbortEvent extends Event {
  /** Set by stopImmediatePropagation(): Node keeps its own flag private. */
  stopped = false;

  constructor(private readonly signal: RunSignal) {
    super("abort");
  }
  override get target(): EventTarget {
    return this.signal;
  }
  override get currentTarget(): EventTarget {
    return this.signal;
  }
  override get srcElement(): EventTarget {
    return this.signal;
  }
  override composedPath(): [EventTarget?] {
    return [this.signal];
  }
  override stopImmediatePropagation(): void {
    this.stopped = true;
    super.stopImmediatePropagation();
  }
}

/** Reports a listener's exception as Node's EventTarget does: as an uncaught exception, after the dispatch. */
function reportUncaught(error: unknown): void {
  process.nextTick(() => {
    throw error;
  });
}

/**
 * The option key with which Node's own listeners (events.once,
 * addAbortListener) resist stopImmediatePropagation: a private symbol, found
 * once by letting addAbortListener add a listener to a probe.
 */
const resistKey: symbol | undefined = (() => {
  let found: symbol | undefined;
  const probe: AbortSignal = Object.create(AbortSignal.prototype, {
    aborted: { value: false },
    addEventListener: {
      value: (_type: string, _listener: unknown, options: unknown) => {
        if (typeof options !== "object" || options === null) return;
        found = Object.getOwnPropertySymbols(options).find(
          (k) => k.description === "kResistStopPropagation",
        );
      },
    },
    removeEventListener: { value: () => undefined },
  });
  try {
    addAbortListener(probe, () => undefined);
  } catch {
    return undefined;
  }
  return found;
})();

/** Whether a listener's options mark it as one of Node's own (see resistKey). */
function resistsStop(options: object): boolean {
  return resistKey !== undefined && Reflect.get(options, resistKey) === true;
}

/** The `capture` flag of add/removeEventListener's options. */
function captureFlag(options: AddOptions | RemoveOptions): number {
  return (typeof options === "boolean" ? options : Boolean(options?.capture)) ? capture : 0;
}

/** The same listener, as the DOM tells them apart: by type, callback and capture. */
function sameListener(r: Registration, type: string, callback: Callback, flags: number): boolean {
  return (
    !(r.flags & removed) &&
    r.type === type &&
    r.callback === callback &&
    (r.flags & capture) === (flags & capture)
  );
}

/** A key of Node's own signals, by its description (undefined if this Node has none such). */
function nodeSignalKey(description: string): symbol | undefined {
  return Object.getOwnPropertySymbols(new AbortController().signal).find(
    (k) => k.description === description,
  );
}

/** Where events.get/setMaxListeners keep a signal's limit of listeners. */
const maxListenersKey = nodeSignalKey("events.maxEventTargetListeners");
/** Set on a signal once it warned of too many listeners (Node's key, so setMaxListeners resets it). */
const maxListenersWarnedKey =
  nodeSignalKey("events.maxEventTargetListenersWarned") ?? Symbol("maxListenersWarned");

/**
 * The warning Node's signals emit (once per signal) when more listeners of
 * one type are added than its limit allows: most likely a leak, such as a
 * listener added per request and never removed.
 */
export class MaxListenersExceededWarning extends Error {
  override readonly name = "MaxListenersExceededWarning";
  constructor(
    readonly target: AbortSignal,
    readonly type: string,
    readonly count: number,
    limit: number,
  ) {
    super(
      `Possible EventTarget memory leak detected. ${count} ${type} listeners added to ` +
        `${inspect(target, { depth: -1 })}. MaxListeners is ${limit}. ` +
        "Use events.setMaxListeners() to increase limit",
    );
  }
}

/** Emits MaxListenersExceededWarning as Node's signals do: once, past the limit (0: none). */
function warnIfTooMany(signal: RunSignal, list: Registration[], type: string): void {
  const limit: unknown = maxListenersKey
    ? Reflect.get(signal, maxListenersKey)
    : defaultMaxListeners;
  if (typeof limit !== "number" || limit <= 0 || list.length <= limit) return;
  if (Reflect.get(signal, maxListenersWarnedKey)) return;
  const count = list.reduce((n, r) => (r.type === type && !(r.flags & removed) ? n + 1 : n), 0);
  if (count <= limit) return;
  Reflect.set(signal, maxListenersWarnedKey, true);
  process.emitWarning(new MaxListenersExceededWarning(signal, type, count, limit));
}

/** What a signal needs only when a caller uses onabort or `AbortSignal.any()`. */
interface Rare {
  onabort: ((this: AbortSignal, ev: Event) => unknown) | null;
  /** Holds what `AbortSignal.any()` registers on the signal (see the module comment). */
  dependants: AbortController | undefined;
}

/** `reason` of a signal that is not aborted. */
const notAborted = Symbol("notAborted");

// The module's own access to a RunSignal's private state, set in its static
// block: not reachable from a signal (ctx.signal.constructor is RunSignal).
let abortLight: (signal: RunSignal, reason: unknown) => void = () => undefined;
/** Where `AbortSignal.any()` keeps its composites of a signal (see the module comment). */
let dependantsOf: (signal: RunSignal) => AbortController = () => new AbortController();

/**
 * The signal of one run. Not constructed by services: `ctx.signal` is one.
 * Aborted only by the supervisor (there is no public way to abort it, as an
 * AbortSignal has none without its controller).
 */
export class RunSignal implements AbortSignal {
  // Three fields: bytes per idle run (see the module comment).
  #reason: unknown = notAborted;
  /** One listener on its own (the usual case), more in an array. */
  #listeners: Registration | Registration[] | undefined = undefined;
  #rare: Rare | undefined = undefined;

  static {
    abortLight = (signal, reason) => signal.#abort(reason);
    dependantsOf = (signal) => (signal.#rareState().dependants ??= new AbortController());
  }

  get aborted(): boolean {
    return this.#reason !== notAborted;
  }

  get reason(): unknown {
    return this.#reason === notAborted ? undefined : this.#reason;
  }

  throwIfAborted(): void {
    if (this.#reason !== notAborted) throw this.#reason;
  }

  get onabort(): ((this: AbortSignal, ev: Event) => unknown) | null {
    return this.#rare?.onabort ?? null;
  }

  set onabort(handler: ((this: AbortSignal, ev: Event) => unknown) | null) {
    const rare = this.#rareState();
    const had = rare.onabort !== null;
    rare.onabort = typeof handler === "function" ? handler : null;
    // As in the DOM: the handler takes its place among the listeners when
    // first set, and leaves it when set to null.
    if (!had && rare.onabort) this.addEventListener("abort", callOnabort);
    if (had && !rare.onabort) this.removeEventListener("abort", callOnabort);
  }

  addEventListener(type: string, callback: Callback | null, options?: AddOptions): void {
    if (callback === null || callback === undefined) return;
    let flags = captureFlag(options);
    const follow = typeof options === "object" ? options?.signal : undefined;
    if (typeof options === "object" && options !== null) {
      if (options.once) flags |= once;
      if (resistsStop(options)) flags |= resist;
      if (follow?.aborted) return;
    }
    const list = this.#listeners;
    const registration: Registration = { type, callback, flags };
    // (A single listener spent by the dispatch under way is replaced.)
    if (list === undefined || (!Array.isArray(list) && list.flags & removed)) {
      this.#listeners = registration;
    } else if (Array.isArray(list)) {
      if (list.some((r) => sameListener(r, type, callback, flags))) return;
      list.push(registration);
      warnIfTooMany(this, list, type);
    } else {
      if (sameListener(list, type, callback, flags)) return;
      this.#listeners = [list, registration];
    }
    follow?.addEventListener(
      "abort",
      () => this.removeEventListener(type, callback, { capture: (flags & capture) !== 0 }),
      { once: true },
    );
  }

  removeEventListener(type: string, callback: Callback | null, options?: RemoveOptions): void {
    const list = this.#listeners;
    if (list === undefined || !callback) return;
    const flags = captureFlag(options);
    if (!Array.isArray(list)) {
      if (!sameListener(list, type, callback, flags)) return;
      list.flags |= removed;
      this.#listeners = undefined;
      return;
    }
    const i = list.findIndex((r) => sameListener(r, type, callback, flags));
    if (i < 0) return;
    list[i].flags |= removed;
    list.splice(i, 1);
  }

  /**
   * The listeners of `type`, in order: what `events.getEventListeners(signal,
   * type)` returns (it asks an object with this method instead of reading
   * Node's private listener list).
   */
  listeners(type: string): Callback[] {
    const list = this.#listeners;
    if (list === undefined) return [];
    return (Array.isArray(list) ? list : [list])
      .filter((r) => r.type === type && !(r.flags & removed))
      .map((r) => r.callback);
  }

  dispatchEvent(event: Event): boolean {
    this.#dispatch(event, event.type);
    return !event.defaultPrevented;
  }

  /** What `util.inspect` shows, as for Node's signals. */
  [Symbol.for("nodejs.util.inspect.custom")](): string {
    return `RunSignal { aborted: ${this.aborted} }`;
  }

  #rareState(): Rare {
    return (this.#rare ??= { onabort: null, dependants: undefined });
  }

  #dispatch(event: Event, type: string): void {
    const list = this.#listeners;
    if (list === undefined) return;
    // Listeners added during the dispatch are not called for it; removed ones are not either.
    if (!Array.isArray(list)) {
      if (this.#call(list, event, type) && this.#listeners === list) this.#listeners = undefined;
      return;
    }
    let spent = false;
    for (const r of list.slice()) if (this.#call(r, event, type)) spent = true;
    // `once` listeners leave in one pass, not one search each: an abort of a
    // signal with n of them stays O(n), as Node's linked list is.
    const now = this.#listeners;
    if (spent && Array.isArray(now)) {
      const kept = now.filter((r) => !(r.flags & removed));
      this.#listeners = kept.length === 0 ? undefined : kept;
    }
  }

  /** Calls one listener if it is still registered for `type`; true if it was `once` (and is now spent). */
  #call(r: Registration, event: Event, type: string): boolean {
    if (r.flags & removed || r.type !== type) return false;
    if (event instanceof RunAbortEvent && event.stopped && !(r.flags & resist)) return false;
    const spent = (r.flags & once) !== 0;
    if (spent) r.flags |= removed;
    try {
      const result: unknown =
        typeof r.callback === "function"
          ? r.callback.call(this, event)
          : r.callback.handleEvent(event);
      if (isThenable(result)) result.then(undefined, reportUncaught);
    } catch (error) {
      reportUncaught(error);
    }
    return spent;
  }

  #abort(reason: unknown): void {
    if (this.#reason !== notAborted) return;
    // As AbortController.abort() without a reason.
    this.#reason =
      reason === undefined ? new DOMException("This operation was aborted", "AbortError") : reason;
    // Listeners stay registered (as on Node's signals) but for the `once` ones.
    if (this.#listeners !== undefined) this.#dispatch(new RunAbortEvent(this), "abort");
    this.#rare?.dependants?.abort(this.#reason);
  }
}

/** The onabort handler's place among the listeners (one function for every signal: dispatch calls it on the signal). */
function callOnabort(this: AbortSignal, event: Event): void {
  this.onabort?.call(this, event);
}

function isThenable(v: unknown): v is PromiseLike<unknown> {
  return (
    (typeof v === "object" || typeof v === "function") &&
    v !== null &&
    typeof Reflect.get(v, "then") === "function"
  );
}

Object.setPrototypeOf(RunSignal.prototype, AbortSignal.prototype);
Object.setPrototypeOf(RunSignal, AbortSignal);

// `events.getMaxListeners(signal)` reads a symbol-keyed field that Node's
// signals carry (events.setMaxListeners writes it): the same default for
// every run signal, on their prototype; setMaxListeners sets one of its own.
if (maxListenersKey) {
  Object.defineProperty(RunSignal.prototype, maxListenersKey, {
    value: defaultMaxListeners,
    writable: true,
  });
}

/**
 * Finds the key under which `AbortSignal.any()` registers its composites on
 * a source signal, by letting it register one on a probe.
 */
function findDependantsKey(): symbol | undefined {
  const probe: AbortSignal = Object.create(AbortSignal.prototype, { aborted: { value: false } });
  try {
    AbortSignal.any([probe]);
  } catch {
    return undefined;
  }
  return Object.getOwnPropertySymbols(probe).find((k) => k.description === "kDependantSignals");
}

/** Whether RunSignals pass for AbortSignals in what Node does with them (see the module comment). */
function lightSignalsWork(): boolean {
  const key = findDependantsKey();
  if (!key) return false;
  Object.defineProperty(RunSignal.prototype, key, {
    get(this: RunSignal) {
      return Reflect.get(dependantsOf(this).signal, key);
    },
    set(this: RunSignal, value: unknown) {
      Reflect.set(dependantsOf(this).signal, key, value);
    },
  });
  try {
    const signal = new RunSignal();
    const composite = AbortSignal.any([signal]);
    let heard = false;
    addAbortListener(signal, () => (heard = true));
    const reason = new Error("probe");
    abortLight(signal, reason);
    return heard && composite.aborted && composite.reason === reason;
  } catch {
    return false;
  }
}

/** Fallback signals' controllers, when RunSignals do not pass for AbortSignals. */
const controllers = new WeakMap<AbortSignal, AbortController>();

/** RunSignals are used (else plain AbortControllers): decided once, when this module loads. */
export const runSignalsLight: boolean = lightSignalsWork();

/** A new run's signal, not aborted. */
export function createRunSignal(): AbortSignal {
  if (runSignalsLight) return new RunSignal();
  const controller = new AbortController();
  controllers.set(controller.signal, controller);
  return controller.signal;
}

/** Aborts a signal made by createRunSignal (nothing if it already is). */
export function abortRunSignal(signal: AbortSignal, reason: unknown): void {
  if (signal instanceof RunSignal) abortLight(signal, reason);
  else controllers.get(signal)?.abort(reason);
}
