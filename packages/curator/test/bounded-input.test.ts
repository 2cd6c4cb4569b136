/**
 * Bounded input (issue 11): a client's oversized values are answered at once
 * with a short status that quotes at most a prefix of them, and the channel
 * stays usable. A status message travels in an HTTP/2 header (grpc-message),
 * so one that echoed a value in full could exceed the header limits: the
 * call then hung without status until its deadline, and the next call on the
 * same channel too.
 *
 * Against a real leader (one-member etcd, real mTLS, the servers' real
 * limits from server-limits.ts), see @metropolis/curator/testing (test-leader.ts).
 */
import { randomBytes } from "node:crypto";
import { Metadata, status, type ServiceError } from "@grpc/grpc-js";
import { api, common, curator } from "@metropolis/proto";
import { clipped, maxClippedLength, maxQuotedLength, quoted } from "../src/bounded-text";
import { curatorServer } from "../src/curator-service";
import { registerTicketKey } from "../src/keys";
import { sealRegisterTicket } from "../src/register-ticket";
import { maxLabelKeyLength, maxLabelValueLength } from "../src/labels";
import { managementServer, managementService } from "../src/management-service";
import { maxRequestBytes } from "../src/server-limits";
import { newKeyPair, startLeader, type LeaderFixture } from "@metropolis/curator/testing";

const { CuratorClient, CuratorService } = curator;

/** A value far above the request limit: refused by grpc-js before it is decoded. */
const oneMegabyte = "k".repeat(1 << 20);
/** A value that fits in a request, but never in a status message. */
const justUnderLimit = "k".repeat(maxRequestBytes - 4096);

/** Longest status message a bounded error may have: a quoted prefix and some words. */
const maxDetails = 400;

/**
 * Deadline of each call: far above any answer (milliseconds), far below
 * Jest's timeout, so that a hang shows as DEADLINE_EXCEEDED, not a timeout.
 */
const deadlineMs = 15_000;

interface Answer {
  code: status;
  details: string;
}

type Callback = (error: ServiceError | null) => void;

/** The status a unary call ends with (OK with empty details on success). */
function answer(
  start: (metadata: Metadata, options: { deadline: number }, cb: Callback) => unknown,
): Promise<Answer> {
  return new Promise((resolve) =>
    start(new Metadata(), { deadline: Date.now() + deadlineMs }, (error) =>
      resolve(
        error ? { code: error.code, details: error.details } : { code: status.OK, details: "" },
      ),
    ),
  );
}

/** The status a server stream ends with, messages ignored. */
function streamAnswer(stream: {
  on(event: "status", listener: (s: Answer) => void): unknown;
  on(event: "error", listener: (e: ServiceError) => void): unknown;
  on(event: "data", listener: () => void): unknown;
}): Promise<Answer> {
  return new Promise((resolve) => {
    stream.on("data", () => undefined);
    stream.on("error", (e) => resolve({ code: e.code, details: e.details }));
    stream.on("status", (s) => resolve({ code: s.code, details: s.details }));
  });
}

/** Expects a short refusal with `code`; `mentions` must be in the message. */
function expectBounded(got: Answer, code: status, mentions?: RegExp): void {
  expect({ code: status[got.code], details: got.details.slice(0, maxDetails) }).toEqual({
    code: status[code],
    details: mentions ? expect.stringMatching(mentions) : expect.any(String),
  });
  expect(got.details.length).toBeLessThanOrEqual(maxDetails);
}

let leader: LeaderFixture;
let ticket: Buffer;

beforeAll(async () => {
  leader = await startLeader({
    services: (ctx) => [
      [CuratorService, curatorServer(ctx)],
      [managementService, managementServer(ctx)],
    ],
  });
  ticket = randomBytes(32);
  const { ctx } = leader;
  await ctx.leadership.commit(
    ctx.leadership
      .txn()
      .then(ctx.kv.put(registerTicketKey).value(sealRegisterTicket(ctx.secrets, ticket))),
  );
}, 30_000);

afterAll(async () => {
  await leader?.stop();
});

describe("quoting client values", () => {
  it("quotes short values whole and long ones as a prefix with their length", () => {
    expect(quoted("zone")).toBe('"zone"');
    const long = quoted("k".repeat(100_000));
    expect(long).toBe(`"${"k".repeat(maxQuotedLength)}"... (100000 characters)`);
    // Escaped: a value cannot end the quote or start a new log line.
    expect(quoted('a"\nb')).toBe(JSON.stringify('a"\nb'));
  });

  it("clips embedded messages and escapes their control characters", () => {
    expect(clipped("certificate CN=x\nforged line")).toBe("certificate CN=x\\u000aforged line");
    const long = clipped("m".repeat(10_000));
    expect(long).toBe(`${"m".repeat(maxClippedLength)}... (10000 characters)`);
  });
});

describe("RegisterNode", () => {
  const request = (labels: Map<string, string>, registerTicket: Buffer = randomBytes(32)) =>
    curator.RegisterNodeRequest.fromPartial({
      registerTicket,
      joinKey: newKeyPair().publicKey,
      labels,
    });

  it.each([
    [
      "a 1 MB label key",
      new Map([[oneMegabyte, "v"]]),
      status.RESOURCE_EXHAUSTED,
      /larger than max/,
    ],
    [
      "a 1 MB label value",
      new Map([["k", oneMegabyte]]),
      status.RESOURCE_EXHAUSTED,
      /larger than max/,
    ],
    [
      "a label key just under the request limit",
      new Map([[justUnderLimit, "v"]]),
      status.INVALID_ARGUMENT,
      new RegExp(
        `"k{${maxQuotedLength}}"\\.\\.\\. \\(${justUnderLimit.length} characters\\) is longer than ${maxLabelKeyLength}`,
      ),
    ],
    [
      "a label value just under the request limit",
      new Map([["k", justUnderLimit]]),
      status.INVALID_ARGUMENT,
      new RegExp(
        `\\(${justUnderLimit.length} characters\\) of label "k" is longer than ${maxLabelValueLength}`,
      ),
    ],
  ])(
    "answers %s without a ticket at once, and the channel keeps working",
    async (_what, labels, code, mentions) => {
      const eph = await leader.client(CuratorClient, { ephemeral: newKeyPair().privateKey });
      expectBounded(
        await answer((md, o, cb) => eph.registerNode(request(labels), md, o, cb)),
        code,
        mentions,
      );
      // The next call on the same channel is answered too (the ticket is wrong).
      expectBounded(
        await answer((md, o, cb) => eph.registerNode(request(new Map()), md, o, cb)),
        status.PERMISSION_DENIED,
        /ticket/,
      );
    },
  );

  it("checks sizes before the ticket, and the labels' characters only after it", async () => {
    const eph = await leader.client(CuratorClient, { ephemeral: newKeyPair().privateKey });
    const register = (labels: Map<string, string>, registerTicket?: Buffer) =>
      answer((md, o, cb) => eph.registerNode(request(labels, registerTicket), md, o, cb));
    const tooLong = new Map([["k".repeat(maxLabelKeyLength + 1), "v"]]);
    const tooMany = new Map(Array.from({ length: 129 }, (_, i) => [`l${i}`, "v"]));
    const badCharacters = new Map([["-bad", "x"]]);
    // Without the ticket: sizes are refused, characters are not even looked at.
    expectBounded(await register(tooLong), status.INVALID_ARGUMENT, /longer than/);
    expectBounded(await register(tooMany), status.INVALID_ARGUMENT, /too many labels/);
    expectBounded(await register(badCharacters), status.PERMISSION_DENIED, /ticket/);
    // With it, the characters are checked.
    expectBounded(await register(badCharacters, ticket), status.INVALID_ARGUMENT, /"-bad"/);
  });
});

describe("node IDs", () => {
  const byId = (id: string) => ({ node: { $case: "id" as const, id } });

  it("answers ApproveNode for a 1 MB node ID and one just under the limit at once, and the channel keeps working", async () => {
    const owner = await leader.client(api.ManagementClient, "owner");
    const approve = (id: string) => answer((md, o, cb) => owner.approveNode(byId(id), md, o, cb));
    expectBounded(await approve(oneMegabyte), status.RESOURCE_EXHAUSTED, /larger than max/);
    expectBounded(
      await approve(justUnderLimit),
      status.INVALID_ARGUMENT,
      new RegExp(
        `invalid node ID "k{${maxQuotedLength}}"\\.\\.\\. \\(${justUnderLimit.length} characters\\)`,
      ),
    );
    expectBounded(await approve(`metropolis-${"0".repeat(32)}`), status.NOT_FOUND, /not found/);
  });

  it("answers Watch and UpdateNodeStatus for a node ID just under the limit with a short status", async () => {
    const node = await leader.client(CuratorClient, "node");
    const watch = node.watch(
      { kind: { $case: "nodeInCluster", nodeInCluster: { nodeId: justUnderLimit } } },
      { deadline: Date.now() + deadlineMs },
    );
    expectBounded(await streamAnswer(watch), status.INVALID_ARGUMENT, /invalid node ID/);
    const status_ = common.NodeStatus.fromPartial({ externalAddress: "10.0.0.1" });
    expectBounded(
      await answer((md, o, cb) =>
        node.updateNodeStatus({ nodeId: justUnderLimit, status: status_ }, md, o, cb),
      ),
      status.PERMISSION_DENIED,
      /may not act for node "k+"\.\.\. \(\d+ characters\)/,
    );
  });
});

describe("other values", () => {
  it("answers a status with an external address, version or boot ID just under the limit with a short status", async () => {
    const node = await leader.client(CuratorClient, "node");
    const nodeId = leader.firstNode.nodeId;
    const report = (fields: Partial<common.NodeStatus>) =>
      answer((md, o, cb) =>
        node.updateNodeStatus(
          {
            nodeId,
            status: common.NodeStatus.fromPartial({ externalAddress: "10.0.0.1", ...fields }),
          },
          md,
          o,
          cb,
        ),
      );
    for (const [field, fields] of [
      ["external_address", { externalAddress: justUnderLimit }],
      ["version", { version: justUnderLimit }],
      ["boot_id", { bootId: justUnderLimit }],
    ] as const) {
      expectBounded(
        await report(fields),
        status.INVALID_ARGUMENT,
        new RegExp(`${field} "k+"\\.\\.\\.`),
      );
    }
    expectBounded(
      await report({ externalAddress: "not an address" }),
      status.INVALID_ARGUMENT,
      /"not an address" is not an IP address/,
    );
  });

  it("answers UpdateNodeLabels with a label key or value just under the limit with a short status", async () => {
    const owner = await leader.client(api.ManagementClient, "owner");
    const target = await leader.addNode();
    const update = (req: Partial<api.UpdateNodeLabelsRequest>) =>
      answer((md, o, cb) =>
        owner.updateNodeLabels(
          api.UpdateNodeLabelsRequest.fromPartial({
            node: { $case: "id", id: target.nodeId },
            ...req,
          }),
          md,
          o,
          cb,
        ),
      );
    expectBounded(
      await update({ add: new Map([[justUnderLimit, "v"]]) }),
      status.INVALID_ARGUMENT,
      /longer than/,
    );
    expectBounded(
      await update({ add: new Map([["k", justUnderLimit]]) }),
      status.INVALID_ARGUMENT,
      /longer than/,
    );
    expectBounded(
      await update({ remove: [justUnderLimit] }),
      status.INVALID_ARGUMENT,
      /longer than/,
    );
    expectBounded(
      await update({ add: new Map([["k", oneMegabyte]]) }),
      status.RESOURCE_EXHAUSTED,
      /larger than max/,
    );
    expectBounded(await update({ add: new Map([["k", "v"]]) }), status.OK);
  });
});
