import * as grpc from "@grpc/grpc-js";
import { api } from "@metropolis/proto";

// The generated service definitions, server interfaces and client classes,
// used by a real grpc-js server and client over 127.0.0.1.

const ownerKey = Buffer.alloc(32, 9);

const aaa: api.AAAServer = {
  escrow(call, callback) {
    const { publicKey } = call.request;
    if (publicKey.length !== 32) {
      callback({ code: grpc.status.INVALID_ARGUMENT, details: "public_key must be 32 bytes" });
      return;
    }
    // A stand-in for the certificate: the key, to show the request arrived.
    callback(null, {
      userCertificate: Buffer.concat([Buffer.from("cert:"), publicKey]),
      caCertificate: Buffer.from("ca"),
    });
  },
};

const debug: api.DebugServer = {
  getLogs(call) {
    const time = new Date("2025-01-02T03:04:05.678Z");
    const entry = (message: string): api.LogEntry => ({
      dn: call.request.dnPrefix,
      level: "info",
      message,
      time,
      metaJson: "",
    });
    call.write({ entries: [entry("one"), entry("two")] });
    call.write({ entries: [entry("three")] });
    call.end();
  },
  getSupervisionTree(_call, callback) {
    callback({ code: grpc.status.UNIMPLEMENTED });
  },
  getCondition(_call, callback) {
    callback({ code: grpc.status.UNIMPLEMENTED });
  },
  watchSupervisionTree(call) {
    call.emit("error", { code: grpc.status.UNIMPLEMENTED });
  },
  getSupervisorReports(call) {
    call.emit("error", { code: grpc.status.UNIMPLEMENTED });
  },
};

let server: grpc.Server;
let address: string;

beforeAll(async () => {
  server = new grpc.Server();
  server.addService(api.AAAService, aaa);
  server.addService(api.DebugService, debug);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) =>
      err ? reject(err) : resolve(p),
    ),
  );
  address = `127.0.0.1:${port}`;
});

afterAll(async () => {
  await new Promise<void>((resolve, reject) =>
    server.tryShutdown((err) => (err ? reject(err) : resolve())),
  );
});

function escrow(client: api.AAAClient, req: api.EscrowRequest): Promise<api.EscrowResponse> {
  return new Promise((resolve, reject) =>
    client.escrow(req, (err, res) => (err ? reject(err) : resolve(res))),
  );
}

describe("AAA over grpc-js", () => {
  let client: api.AAAClient;
  beforeAll(() => {
    client = new api.AAAClient(address, grpc.credentials.createInsecure());
  });
  afterAll(() => client.close());

  it("serves a unary call", async () => {
    const res = await escrow(client, { publicKey: ownerKey });
    expect(res.userCertificate).toEqual(Buffer.concat([Buffer.from("cert:"), ownerKey]));
    expect(res.caCertificate).toEqual(Buffer.from("ca"));
  });

  it("carries a status error back to the client", async () => {
    await expect(escrow(client, { publicKey: Buffer.alloc(3) })).rejects.toMatchObject({
      code: grpc.status.INVALID_ARGUMENT,
      details: "public_key must be 32 bytes",
    });
  });
});

describe("Debug over grpc-js", () => {
  let client: api.DebugClient;
  beforeAll(() => {
    client = new api.DebugClient(address, grpc.credentials.createInsecure());
  });
  afterAll(() => client.close());

  it("streams server responses", async () => {
    const stream = client.getLogs({ dnPrefix: "root.role", tail: 10, follow: false });
    const batches: api.GetLogsResponse[] = [];
    for await (const batch of stream) batches.push(batch as api.GetLogsResponse);
    expect(batches.map((b) => b.entries.map((e) => e.message))).toEqual([
      ["one", "two"],
      ["three"],
    ]);
    expect(batches[0]?.entries[0]).toEqual({
      dn: "root.role",
      level: "info",
      message: "one",
      time: new Date("2025-01-02T03:04:05.678Z"),
      metaJson: "",
    });
  });
});
