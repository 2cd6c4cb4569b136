/**
 * The curator client's grpc-js interceptors, against a real server:
 * - quietCancel: a streaming call its caller cancels ends (`end`, status OK)
 *   instead of failing with CANCELLED; a status the server sends still fails
 *   the call as it would without the interceptor.
 * - stacklessStatus: a call ending with an error status fails with the same
 *   code, details and caller's stack, without grpc-js' own frames.
 */
import { once } from "node:events";
import {
  credentials,
  Server,
  status,
  type ClientReadableStream,
  type Interceptor,
  type ServerWritableStream,
  type ServiceError,
  type StatusObject,
} from "@grpc/grpc-js";
import { quietCancel } from "../src/quiet-cancel";
import { stacklessStatus } from "../src/stackless-status";
import { bindInsecure, identity, TickClient, tickService } from "./raw-services";

const host = "127.0.41.2";

let server: Server;
let client: InstanceType<typeof TickClient>;
/** What the server does with a call after its first message: stay open, or fail it. */
let then: "stay" | "fail" = "stay";

beforeAll(async () => {
  server = new Server();
  server.addService(tickService, {
    tick: (call: ServerWritableStream<Buffer, Buffer>) => {
      call.write(Buffer.from("tick"));
      // A streaming response ends with the status of the error it is given.
      if (then === "fail") call.emit("error", { code: status.UNAVAILABLE, details: "gone" });
    },
  });
  const port = await bindInsecure(server, host);
  client = new TickClient(`${host}:${port}`, credentials.createInsecure());
});
afterAll(() => {
  client.close();
  server.forceShutdown();
});

/** A stream opened (with `interceptors`), once its first message has come. */
async function opened(
  interceptors: Interceptor[] = [quietCancel],
): Promise<ClientReadableStream<Buffer>> {
  const stream = client.makeServerStreamRequest(
    "/test.Tick/Tick",
    identity,
    identity,
    Buffer.alloc(0),
    { interceptors },
  );
  await once(stream, "data");
  return stream;
}

/** How `stream` ends: its 'error' or 'end', and the status it reports. */
function outcome(stream: ClientReadableStream<Buffer>) {
  return new Promise<{ error?: ServiceError; status: StatusObject }>((resolve) => {
    let error: ServiceError | undefined;
    stream.on("error", (e: ServiceError) => (error = e));
    stream.on("status", (s: StatusObject) => resolve({ error, status: s }));
    stream.resume();
  });
}

describe("quietCancel", () => {
  it("ends a stream its caller cancelled, without an error", async () => {
    then = "stay";
    const stream = await opened();
    const ended = outcome(stream);
    const end = once(stream, "end");
    stream.cancel();
    const { error, status: s } = await ended;
    await end;
    expect(error).toBeUndefined();
    expect(s.code).toBe(status.OK);
  });

  it("control: without it, the same cancel fails the stream with CANCELLED", async () => {
    then = "stay";
    const stream = await opened([]);
    const ended = outcome(stream);
    stream.cancel();
    const { error } = await ended;
    expect(error?.code).toBe(status.CANCELLED);
  });

  it("passes the server's error status on", async () => {
    then = "fail";
    const stream = await opened();
    const { error, status: s } = await outcome(stream);
    expect(error?.code).toBe(status.UNAVAILABLE);
    expect(s.code).toBe(status.UNAVAILABLE);
  });
});

describe("stacklessStatus", () => {
  /** The lines of an error's stack that are frames ("    at …") before grpc-js' "for call at". */
  const ownFrames = (e: ServiceError | undefined) =>
    (e?.stack ?? "")
      .split("\nfor call at\n")[0]
      .split("\n")
      .filter((line) => line.trimStart().startsWith("at "));

  /** Opens a stream the server fails after its first message; named, so that the caller's stack can be found. */
  async function failedFromHere(interceptors: Interceptor[]) {
    then = "fail";
    return outcome(await opened(interceptors));
  }

  it("fails the call with the server's status and the caller's stack, without grpc-js' frames", async () => {
    const limit = Error.stackTraceLimit;
    const { error, status: s } = await failedFromHere([stacklessStatus]);
    expect(error?.code).toBe(status.UNAVAILABLE);
    expect(error?.details).toBe("gone");
    expect(s.code).toBe(status.UNAVAILABLE);
    expect(ownFrames(error)).toEqual([]);
    expect(error?.stack).toContain("for call at");
    expect(error?.stack?.split("\nfor call at\n")[1]).toContain("opened");
    expect(Error.stackTraceLimit).toBe(limit);
  });

  it("control: without it, the error has grpc-js' frames of its own", async () => {
    const { error } = await failedFromHere([]);
    expect(error?.code).toBe(status.UNAVAILABLE);
    expect(ownFrames(error).length).toBeGreaterThan(0);
  });

  it("passes an OK end through", async () => {
    then = "stay";
    const stream = await opened([quietCancel, stacklessStatus]);
    const ended = outcome(stream);
    stream.cancel();
    const { error, status: s } = await ended;
    expect(error).toBeUndefined();
    expect(s.code).toBe(status.OK);
  });
});
