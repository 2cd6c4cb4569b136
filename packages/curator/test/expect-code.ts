/** `expectCode`: the assertion every curator service test makes of a refused call. */
import { status, type ServiceError } from "@grpc/grpc-js";

/** Expects `p` to fail with gRPC status `code` (and a message matching `message`). */
export async function expectCode(
  p: Promise<unknown>,
  code: status,
  message?: RegExp,
): Promise<void> {
  const error = await p.then(
    () => undefined,
    (e: unknown) => e as ServiceError,
  );
  expect(error).toBeDefined();
  expect(status[error!.code]).toBe(status[code]);
  if (message) expect(error!.details).toMatch(message);
}
