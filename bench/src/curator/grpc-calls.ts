/**
 * gRPC helpers of the curator benchmark: unary calls with a deadline, retries
 * while a listener is not serving yet, status codes of errors, and a pool that
 * runs tasks a few at a time.
 */
import { Metadata, status, type CallOptions, type ServiceError } from "@grpc/grpc-js";

export type UnaryMethod<Req, Res> = (
  request: Req,
  metadata: Metadata,
  options: Partial<CallOptions>,
  callback: (err: ServiceError | null, res: Res) => void,
) => unknown;

/** A unary call with a deadline: a call that is never answered fails the benchmark, naming itself. */
export function rpc<Req, Res>(
  what: string,
  deadlineMs: number,
  method: UnaryMethod<Req, Res>,
  request: Req,
): Promise<Res> {
  return new Promise((resolve, reject) =>
    method(request, new Metadata(), { deadline: Date.now() + deadlineMs }, (err, res) =>
      err
        ? reject(Object.assign(new Error(`${what}: ${err.message}`), { code: err.code }))
        : resolve(res),
    ),
  );
}

/** The gRPC status code an error carries, if it carries one. */
export function codeOf(e: unknown): number | undefined {
  return typeof e === "object" && e !== null && "code" in e && typeof e.code === "number"
    ? e.code
    : undefined;
}

export const isCancelled = (e: unknown): boolean => codeOf(e) === status.CANCELLED;

/**
 * Runs `call` until it is not answered UNAVAILABLE (a listener not bound yet,
 * or etcd changing its leader), for up to 10 s.
 */
export async function untilServing<T>(call: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      return await call();
    } catch (e) {
      if (codeOf(e) !== status.UNAVAILABLE || Date.now() > deadline) throw e;
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}

/** Runs `task(0)` … `task(count - 1)`, at most `concurrency` at a time. */
export async function pool(
  count: number,
  concurrency: number,
  task: (i: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) await task(next++);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
}
