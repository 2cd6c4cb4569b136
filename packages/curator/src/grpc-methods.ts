/**
 * Every gRPC method of the wire schema, found by walking what
 * `@metropolis/proto` exports (so that a new service or RPC shows up here
 * without anyone listing it), and one generic way to call any of them and
 * get its outcome: the status a call ended with, or OK once a unary call
 * answered or a stream delivered its first message.
 *
 * Shared by the authorization matrix and the fuzz tests.
 */
import {
  Client,
  Metadata,
  type ClientDuplexStream,
  type ClientReadableStream,
  status,
  type MethodDefinition,
  type ServiceDefinition,
  type ServiceError,
} from "@grpc/grpc-js";
import * as proto from "@metropolis/proto";

/** One method of one service, e.g. `{ key: "Curator.Watch", … }`. */
export interface GrpcMethod {
  /** `Service.Method`, e.g. `Management.GetNodes` (service names are unique across packages). */
  key: string;
  /** The service's short name, e.g. `Management`. */
  service: string;
  /** The method's name as in the schema, e.g. `GetNodes`. */
  method: string;
  /** The generated definition: path, streaming kinds, (de)serializers. */
  definition: MethodDefinition<unknown, unknown>;
}

function isMethodDefinition(value: unknown): value is MethodDefinition<unknown, unknown> {
  if (typeof value !== "object" || value === null) return false;
  const m: Partial<Record<keyof MethodDefinition<unknown, unknown>, unknown>> = value;
  return (
    typeof m.path === "string" &&
    typeof m.requestSerialize === "function" &&
    typeof m.responseDeserialize === "function" &&
    typeof m.requestStream === "boolean" &&
    typeof m.responseStream === "boolean"
  );
}

function isServiceDefinition(value: unknown): value is ServiceDefinition {
  if (typeof value !== "object" || value === null) return false;
  const methods = Object.values(value);
  return methods.length > 0 && methods.every(isMethodDefinition);
}

/** Every method of every service the schema package exports, sorted by key. */
export function grpcMethods(): GrpcMethod[] {
  const found: GrpcMethod[] = [];
  for (const namespace of Object.values(proto)) {
    for (const exported of Object.values(namespace)) {
      if (!isServiceDefinition(exported)) continue;
      for (const definition of Object.values(exported)) {
        // "/metropolis.proto.curator.Curator/Watch"
        const match = /^\/(?:[\w]+\.)*(\w+)\/(\w+)$/.exec(definition.path);
        if (!match) throw new Error(`unexpected gRPC method path ${definition.path}`);
        const [, service, method] = match;
        found.push({ key: `${service}.${method}`, service, method, definition });
      }
    }
  }
  const keys = found.map((m) => m.key);
  const duplicate = keys.find((k, i) => keys.indexOf(k) !== i);
  if (duplicate !== undefined) throw new Error(`two services define ${duplicate}`);
  return found.sort((a, b) => a.key.localeCompare(b.key));
}

/** How a call ended: OK (answered, or a stream's first message), or the status it was refused with. */
export interface Outcome {
  code: status;
  details: string;
}

/** The outcome's status as its name, e.g. "PERMISSION_DENIED". */
export function codeName(outcome: Outcome): string {
  return status[outcome.code];
}

export interface InvokeOptions {
  /** The call's deadline from now; a call that has not ended by then is DEADLINE_EXCEEDED. */
  deadlineMs: number;
  /**
   * Send the request as raw bytes instead of encoding it: `request` must
   * then be a Buffer, passed through as the message as it is.
   */
  raw?: boolean;
}

const passThrough = (b: Buffer): Buffer => b;

/**
 * Calls `m` on `client`'s channel with `request` and resolves with its
 * outcome; never rejects for a gRPC status. Streams are cancelled after
 * their first message (a client-and-server stream first sends `request`
 * as its one message, and keeps its side open).
 */
export function invoke(
  client: Client,
  m: GrpcMethod,
  request: unknown,
  opts: InvokeOptions,
): Promise<Outcome> {
  const { definition } = m;
  const serialize = opts.raw
    ? (value: unknown) => {
        if (!Buffer.isBuffer(value)) throw new TypeError("a raw request must be a Buffer");
        return passThrough(value);
      }
    : definition.requestSerialize;
  const options = { deadline: Date.now() + opts.deadlineMs };
  const ok: Outcome = { code: status.OK, details: "" };
  const failed = (e: ServiceError): Outcome => ({ code: e.code, details: e.details });
  return new Promise<Outcome>((resolve) => {
    if (!definition.requestStream && !definition.responseStream) {
      client.makeUnaryRequest(
        definition.path,
        serialize,
        passThrough,
        request,
        new Metadata(),
        options,
        (error) => resolve(error ? failed(error) : ok),
      );
      return;
    }
    if (definition.requestStream && !definition.responseStream) {
      throw new Error(`${m.key}: client-streaming methods are not supported by this test yet`);
    }
    let ended = false;
    let stream: ClientReadableStream<unknown> | ClientDuplexStream<unknown, unknown>;
    if (definition.requestStream) {
      const duplex = client.makeBidiStreamRequest(
        definition.path,
        serialize,
        passThrough,
        new Metadata(),
        options,
      );
      duplex.write(request);
      stream = duplex;
    } else {
      stream = client.makeServerStreamRequest(
        definition.path,
        serialize,
        passThrough,
        request,
        new Metadata(),
        options,
      );
    }
    const end = (outcome: Outcome) => {
      if (ended) return;
      ended = true;
      resolve(outcome);
      stream.cancel();
    };
    stream.on("data", () => end(ok));
    stream.on("error", (e: ServiceError) => end(failed(e)));
    // A stream that ends without a message (status OK) is an answer too.
    stream.on("status", (s: { code: status; details: string }) =>
      end({ code: s.code, details: s.details }),
    );
  });
}
