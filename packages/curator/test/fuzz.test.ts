/**
 * Fuzzing with fast-check: every RPC of Curator, CuratorLocal, Management
 * and AAA (enumerated from @metropolis/proto: a new one fails here until it
 * has a generator) receives generated requests against a real leading
 * curator (real etcd, real mTLS, its real listener with the server limits),
 * as each caller that may call it and at least one that may not: requests
 * with random and malformed fields (huge and unicode strings, wrong-length
 * keys, unknown enum values, invalid node IDs, odd label keys, absent
 * oneofs), and raw bytes sent as they are (noise, random protobuf fields,
 * sizes around `maxRequestBytes`).
 *
 * Each case must hold:
 * - the call ends with a status within its deadline (a stream: its first
 *   message or its status; it is then cancelled);
 * - that status is a clear answer: not INTERNAL, UNKNOWN, DATA_LOSS,
 *   UNAVAILABLE or DEADLINE_EXCEEDED — except grpc-js' own INTERNAL for bytes
 *   that do not decode as the request message ("Error deserializing
 *   request"), which the curator never sees;
 * - a request larger than `maxRequestBytes` is refused, RESOURCE_EXHAUSTED
 *   (a Heartbeat stream may refuse its caller before it reads the message);
 * - a refused call changed nothing: etcd's revision is the same after it;
 * - the server still answers a known-good call on the same channel;
 * - no unhandled rejection or uncaught exception happens in the process:
 *   jest fails the running test on either (such a failure names no case,
 *   so the file prints the seed of its run first).
 *
 * METROPOLIS_FUZZ_RUNS sets the cases per RPC (default 200, for CI; more
 * finds more). A failing case prints the seed and path that replay it:
 * METROPOLIS_FUZZ_SEED=… METROPOLIS_FUZZ_PATH=… npx jest packages/curator/test/fuzz.test.ts -t '<RPC>';
 * METROPOLIS_FUZZ_SHRINK=1 shrinks it to a smaller case first; METROPOLIS_FUZZ_STATS=1
 * prints how often each RPC answered which status.
 *
 * Deliberately not fuzzed as targets of Management writes: the first node
 * (the only consensus member: deleting it with the bypasses removes the
 * cluster's last etcd member, issue 11's DeleteNode finding, fixed
 * elsewhere) and the "node" caller itself for DeleteNode and
 * UpdateNodeRoles (its record is what the node-only RPCs are fuzzed as).
 * Their targets are throwaway nodes that never report an address, so
 * UpdateNodeRoles never adds an etcd member here (the roles tests cover
 * membership changes). DecommissionNode takes throwaway UP nodes only;
 * RemoveConsensusMember may name the one member, which its node's role
 * keeps (refused, forced or not).
 */
import { status, Client } from "@grpc/grpc-js";
import fc from "fast-check";
import { nodeTemplate, selfSignCertificate, tlsMaterial } from "@metropolis/pki";
import { access, api, common, protocolVersion } from "@metropolis/proto";
import { maxRequestBytes } from "../src/server-limits";
import {
  newKeys,
  startCurators,
  type CuratorsFixture,
  type RegisteredNode,
  type Tls,
  type UpNode,
} from "./curators-fixture";
import {
  bytes,
  enumValue,
  labelKey,
  labels,
  nodeId,
  rawRequest,
  text,
  validName,
} from "./fuzz-arbitraries";
import {
  codeName,
  grpcMethods,
  invoke,
  type GrpcMethod,
  type Outcome,
} from "@metropolis/curator/testing";

const runs = Number(process.env.METROPOLIS_FUZZ_RUNS ?? 200);
/** The seed of this run (each RPC's cases start from it and the RPC's name), and the path of one case to replay. */
const seed = process.env.METROPOLIS_FUZZ_SEED
  ? Number(process.env.METROPOLIS_FUZZ_SEED)
  : Math.floor(Math.random() * 2 ** 31);
const replayPath = process.env.METROPOLIS_FUZZ_PATH;

/** The seed of `key`'s cases: the run's, varied by the RPC, so that RPCs do not all get the same sequence of choices. */
function seedOf(key: string): number {
  let h = seed;
  for (const c of key) h = (Math.imul(h, 31) + c.charCodeAt(0)) | 0;
  return h;
}
/** Shrink a failing case to a smaller one (slower: each try of a hanging case waits its deadline). */
const shrink = process.env.METROPOLIS_FUZZ_SHRINK === "1";
/** Every call ends within this (a healthy one takes milliseconds). */
const deadlineMs = 5_000;

/** The services fuzzed here (Debug is the node's, see packages/node). */
const fuzzedServices = ["AAA", "Access", "Curator", "CuratorLocal", "Management"];

/**
 * Who calls:
 * - none: no client certificate;
 * - self-signed: a self-signed certificate claiming the "node" caller's ID;
 * - node: an UP node; owner: the owner;
 * - ephemeral: a self-signed certificate of a fresh key;
 * - ephemeral standby: of a node registered and approved for this case (CommitNode);
 * - ephemeral join: of the "node" caller's join key (JoinNode);
 * - ephemeral owner: of the owner key (Escrow).
 */
type Caller =
  | "none"
  | "self-signed"
  | "node"
  | "owner"
  | "ephemeral"
  | "ephemeral standby"
  | "ephemeral join"
  | "ephemeral owner";

/** One case: who calls, with what. */
interface FuzzCase {
  caller: Caller;
  message: { raw: false; request: unknown } | { raw: true; bytes: Buffer };
}

/**
 * What an RPC is fuzzed with: its callers (authorized ones and at least one
 * refused), and its requests (made once the cluster exists: they name its
 * nodes and ticket).
 */
interface Target {
  callers: Callers;
  request: () => fc.Arbitrary<unknown>;
}

/** Who calls an RPC: callers it serves (chosen twice as often), and callers it refuses. */
interface Callers {
  authorized: readonly Caller[];
  refused: readonly Caller[];
}

let cluster: CuratorsFixture;
/** The "node" caller. */
let node: UpNode;
/** Nodes made for the fuzzer to change: NEW, STANDBY and UP (no roles, no address). */
let throwaway: { ids: string[]; publicKeys: Buffer[]; upIds: string[]; upPublicKeys: Buffer[] };
let fixedTls: Partial<Record<Caller, Tls>>;
/** The etcd member (hex) of the first node, the fixture's only one. */
let memberId: string;
beforeAll(async () => {
  console.log(`fuzz seed ${seed}: METROPOLIS_FUZZ_SEED=${seed} replays this run`);
  cluster = await startCurators({ follower: false });
  node = await cluster.addUpNode();
  memberId = (await cluster.member.status.raftStatus()).memberId;
  const attacker = newKeys();
  const claim = await selfSignCertificate(
    { ...nodeTemplate(), subject: { commonName: node.nodeId } },
    attacker.privateKey,
  );
  fixedTls = {
    "self-signed": tlsMaterial({ certificate: claim, privateKey: attacker.privateKey, ca: claim }),
    node: node.tls,
    owner: cluster.owner.tls,
    "ephemeral join": await cluster.ephemeralTls(node.join.privateKey),
    "ephemeral owner": await cluster.ephemeralTls(cluster.owner.keys.privateKey),
  };
}, 120_000);

/** Fresh throwaway nodes for each RPC: the previous one's case may have deleted or changed them. */
beforeEach(async () => {
  const made: RegisteredNode[] = [];
  for (let i = 0; i < 4; i++) made.push(await cluster.registerNode());
  for (let i = 0; i < 3; i++) {
    const standby = await cluster.registerNode();
    await cluster.approve(standby.nodeId);
    made.push(standby);
  }
  const up: RegisteredNode[] = [];
  for (let i = 0; i < 3; i++) up.push(await cluster.addUpNode());
  made.push(...up);
  throwaway = {
    ids: made.map((n) => n.nodeId),
    publicKeys: made.map((n) => n.keys.publicKey),
    upIds: up.map((n) => n.nodeId),
    upPublicKeys: up.map((n) => n.keys.publicKey),
  };
}, 60_000);

afterAll(async () => {
  await cluster?.stop();
});

// ── Requests ───────────────────────────────────────────────────────────────

/** An optional bool field: mostly unset. */
const optionalBool = fc.oneof(
  { weight: 2, arbitrary: fc.constant(undefined) },
  { weight: 1, arbitrary: fc.boolean() },
);

/**
 * How Management requests name a node: absent, by ID, or by public key; one
 * of `ids` (and `publicKeys`) half the time.
 */
function selector(ids: string[], publicKeys: Buffer[]) {
  return fc.oneof(
    { weight: 1, arbitrary: fc.constant(undefined) },
    { weight: 4, arbitrary: fc.constantFrom(...ids).map((id) => ({ $case: "id" as const, id })) },
    { weight: 2, arbitrary: nodeId(ids).map((id) => ({ $case: "id" as const, id })) },
    {
      weight: 2,
      arbitrary: fc
        .oneof(fc.constantFrom(...publicKeys), bytes)
        .map((pubkey) => ({ $case: "pubkey" as const, pubkey })),
    },
  );
}

/** The values of a ts-proto enum (UNRECOGNIZED, -1, included). */
const enumValues = (e: Record<string, string | number>): number[] =>
  Object.values(e).filter((v): v is number => typeof v === "number");

/** The wire protocol version a node sends: this build's three times in four, else any. */
const sentProtocolVersion = fc.oneof(
  { weight: 3, arbitrary: fc.constant(protocolVersion) },
  { weight: 1, arbitrary: fc.nat() },
);

const nodeStatus = fc.record({
  externalAddress: fc.oneof(fc.ipV4(), fc.ipV6(), text),
  runningCurator: fc.option(
    fc.record({ port: fc.oneof(fc.integer({ min: 0, max: 70_000 }), fc.nat()) }),
    { nil: undefined },
  ),
  version: text,
  bootId: text,
  timestamp: fc.option(fc.date({ noInvalidDate: true }), { nil: undefined }),
  protocolVersion: sentProtocolVersion,
});

const nodeCallers: Callers = { authorized: ["node"], refused: ["owner", "none", "self-signed"] };
const ownerCallers: Callers = { authorized: ["owner"], refused: ["node", "none", "ephemeral"] };
const anyoneCallers: Callers = {
  authorized: ["none", "node", "self-signed", "ephemeral"],
  refused: [],
};
/** A fresh 32-byte key or unlock key. */
const key32 = fc.uint8Array({ minLength: 32, maxLength: 32 }).map((b) => Buffer.from(b));
/** `valid` three times in four, else any bytes. */
const mostly = (valid: fc.Arbitrary<Buffer>) =>
  fc.oneof({ weight: 3, arbitrary: valid }, { weight: 1, arbitrary: bytes });

const watchable = () => [node.nodeId, cluster.firstNode.nodeId, ...throwaway.ids];
const ids = () => throwaway.ids;
const keys = () => throwaway.publicKeys;
const upIds = () => throwaway.upIds;
const upKeys = () => throwaway.upPublicKeys;
const empty = () => fc.constant({});

/** The fuzz target of each RPC. */
const targets: Record<string, Target> = {
  "Access.IssueAccess": {
    callers: ownerCallers,
    request: () =>
      fc.record({
        name: fc.oneof(fc.constantFrom("alice", "bob.b", "owner", "metropolis-x"), text),
        role: enumValue(enumValues(access.AccessRole)),
        publicKey: mostly(key32),
        ttlSeconds: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 3600 }), fc.maxSafeNat()),
      }),
  },
  "Access.ListAccess": { callers: ownerCallers, request: empty },
  "Access.RevokeAccess": {
    callers: ownerCallers,
    request: () =>
      fc.record({
        target: fc.oneof(
          fc.constant(undefined),
          fc.oneof(fc.constant("alice"), text).map((name) => ({ $case: "name" as const, name })),
          fc
            .oneof(
              fc.bigInt({ min: 0n, max: 2n ** 160n }).map((n) => n.toString(16)),
              text,
            )
            .map((serial) => ({ $case: "serial" as const, serial })),
        ),
      }),
  },
  "AAA.Escrow": {
    callers: { authorized: ["ephemeral owner"], refused: ["ephemeral", "owner", "node", "none"] },
    request: () => fc.record({ publicKey: mostly(fc.constant(cluster.owner.keys.publicKey)) }),
  },
  "Curator.CommitNode": {
    // A fresh key is the right kind of caller, but of no registered node.
    callers: { authorized: ["ephemeral standby"], refused: ["ephemeral", "node", "none"] },
    request: () => fc.record({ clusterUnlockKey: mostly(key32) }),
  },
  "Curator.GetConsensusStatus": { callers: nodeCallers, request: empty },
  "Curator.Heartbeat": {
    callers: nodeCallers,
    // Any wall clock and round trip: a clock sample, judged only by the health check.
    request: () =>
      fc.record({
        sentAt: fc.option(fc.date(), { nil: undefined }),
        previousRoundTripMs: fc.oneof(fc.constant(0), fc.nat(120_000), fc.constant(2 ** 32 - 1)),
        // An acknowledgement of a wipe no record asked for: not recorded, and harmless.
        wipeAcknowledged: fc.option(fc.boolean(), { nil: undefined }),
        consensusView: fc.option(
          fc.record({
            memberIds: fc.array(
              fc.oneof(
                fc.string(),
                fc.string({ unit: fc.constantFrom(..."0123456789abcdef"), maxLength: 16 }),
              ),
              {
                maxLength: 70,
              },
            ),
            raftLeaderId: fc.string(),
            raftTerm: fc.oneof(fc.nat(), fc.maxSafeNat()),
            // Any database size and quota, each absent or not, a zero quota, sizes beyond any etcd's: judged only by the health check.
            databaseSizeBytes: fc.option(fc.oneof(fc.nat(), fc.maxSafeNat()), { nil: undefined }),
            databaseQuotaBytes: fc.option(fc.oneof(fc.constant(0), fc.nat(), fc.maxSafeNat()), {
              nil: undefined,
            }),
          }),
          { nil: undefined },
        ),
      }),
  },
  "Curator.JoinNode": {
    callers: { authorized: ["ephemeral join"], refused: ["ephemeral", "node", "none"] },
    request: () => fc.record({ protocolVersion: sentProtocolVersion }),
  },
  "Curator.RegisterNode": {
    callers: { authorized: ["ephemeral"], refused: ["node", "owner", "none"] },
    request: () =>
      fc.record({
        registerTicket: mostly(fc.constant(cluster.ticket)),
        joinKey: mostly(key32),
        labels,
        protocolVersion: sentProtocolVersion,
      }),
  },
  "Curator.UpdateNodeStatus": {
    callers: nodeCallers,
    request: () =>
      fc.record({
        nodeId: fc.oneof(
          { weight: 2, arbitrary: fc.constant(node.nodeId) },
          { weight: 1, arbitrary: nodeId([cluster.firstNode.nodeId]) },
        ),
        status: fc.option(nodeStatus, { nil: undefined }),
      }),
  },
  "Curator.Watch": {
    callers: nodeCallers,
    request: () =>
      fc.record({
        kind: fc.oneof(
          fc.constant(undefined),
          nodeId(watchable()).map((id) => ({
            $case: "nodeInCluster" as const,
            nodeInCluster: { nodeId: id },
          })),
          // Afresh, resumed from a revision (reached or not), or a negative
          // one; of no etcd cluster named, of another, or of any text.
          fc
            .record({
              resumeFromRevision: fc.oneof(
                fc.constant(0),
                fc.integer({ min: 1, max: 10_000 }),
                fc.maxSafeInteger(),
              ),
              resumeEtcdClusterId: fc.oneof(
                fc.constant(""),
                fc.bigInt({ min: 1n, max: 2n ** 64n - 1n }).map(String),
                fc.string({ maxLength: 64 }),
              ),
            })
            .map((nodesInCluster) => ({
              $case: "nodesInCluster" as const,
              nodesInCluster,
            })),
        ),
      }),
  },
  "Curator.WatchRevocations": { callers: nodeCallers, request: empty },
  "CuratorLocal.GetCACertificate": { callers: anyoneCallers, request: empty },
  "CuratorLocal.GetCurrentLeader": { callers: anyoneCallers, request: empty },
  "Management.ApproveNode": {
    callers: ownerCallers,
    request: () => fc.record({ node: selector([node.nodeId, ...ids()], keys()) }),
  },
  "Management.ConfigureCluster": {
    callers: ownerCallers,
    request: () => {
      const config = fc.option(
        fc.record({
          storagePolicy: enumValue(enumValues(common.StoragePolicy)),
          heartbeatTimeoutMs: fc.oneof(
            fc.constantFrom(0, 999, 1_000, 60_000, 3_600_000, 3_600_001),
            fc.nat(),
          ),
        }),
        { nil: undefined },
      );
      return fc.record({
        baseConfig: config,
        newConfig: config,
        updateMask: fc.option(
          fc.array(
            fc.oneof(
              fc.constantFrom("storage_policy", "heartbeat_timeout_ms"),
              validName,
              labelKey,
            ),
            {
              maxLength: 20,
            },
          ),
          { nil: undefined },
        ),
      });
    },
  },
  "Management.DeleteNode": {
    callers: ownerCallers,
    request: () =>
      fc.record({
        node: selector(ids(), keys()),
        bypassHasRoles: fc.boolean(),
        bypassNodeUp: fc.boolean(),
      }),
  },
  "Management.GetClusterConsensus": { callers: ownerCallers, request: empty },
  "Management.GetClusterInfo": { callers: ownerCallers, request: empty },
  "Management.GetNodes": {
    callers: ownerCallers,
    request: () =>
      fc.record({
        states: fc.array(enumValue(enumValues(common.NodeState)), { maxLength: 6 }),
        roles: fc.array(enumValue(enumValues(api.NodeRole)), { maxLength: 6 }),
        labels,
      }),
  },
  "Management.GetRegisterTicket": { callers: ownerCallers, request: empty },
  "Management.RotateClusterSecretsKey": { callers: ownerCallers, request: empty },
  // No fields: its raw-bytes cases (unknown fields, noise) are what there is to fuzz.
  "Management.WatchNodes": { callers: ownerCallers, request: empty },
  "Management.WatchClusterConsensus": { callers: ownerCallers, request: empty },
  "Management.UpdateNodeLabels": {
    callers: ownerCallers,
    request: () =>
      fc.record({
        node: selector([node.nodeId, ...ids()], keys()),
        add: labels,
        remove: fc.oneof(
          fc.array(validName, { maxLength: 8 }),
          fc.array(labelKey, { maxLength: 8 }),
        ),
      }),
  },
  "Management.UpdateNodeRoles": {
    callers: ownerCallers,
    request: () =>
      fc.record({
        node: selector(upIds(), upKeys()),
        consensusMember: optionalBool,
        kubernetesController: optionalBool,
        kubernetesWorker: optionalBool,
        force: fc.boolean(),
      }),
  },
  // Read only: any node, the first (the one etcd member) included.
  "Management.CheckNodeMaintenance": {
    callers: ownerCallers,
    request: () =>
      fc.record({
        node: selector(watchable(), keys()),
        action: enumValue(enumValues(api.NodeMaintenance)),
      }),
  },
  "Management.DecommissionNode": {
    callers: ownerCallers,
    // `wipe` unset or false only: with it the call waits up to 30 s for the node's
    // acknowledgement on its heartbeat (a throwaway node runs none), beyond the
    // deadline. The wipe is covered by roleserve's wipe test and e2e/decommission-wipe.
    request: () =>
      fc.record({
        node: selector(upIds(), upKeys()),
        force: fc.boolean(),
        wipe: fc.constantFrom(undefined, false),
      }),
  },
  // The one member belongs to the first node, which holds the role: refused, forced or not.
  "Management.RemoveConsensusMember": {
    callers: ownerCallers,
    request: () =>
      fc.record({
        memberId: fc.oneof(
          fc.constant(memberId),
          fc.stringMatching(/^[0-9a-f]{1,16}$/),
          fc.stringMatching(/^[0-9A-Fa-f]{15,18}$/),
          text,
        ),
        force: fc.boolean(),
      }),
  },
  "Management.MoveConsensusLeader": {
    callers: ownerCallers,
    request: () => fc.record({ nodeId: nodeId(watchable()) }),
  },
  "Management.DefragmentConsensus": {
    callers: ownerCallers,
    // Not forced: the quorum check refuses it on this one-member cluster. A forced one
    // defragments the only member, which stalls it (the leader's lease renewals with it) for
    // as long as the database the other targets filled takes, seconds in a full run: a
    // leader stepping down, not an unclear answer. The forced path is tested on three
    // members (consensus-maintenance.test.ts), and the risk is in the curator README.
    request: () => fc.record({ force: fc.constant(false) }),
  },
  "Management.GetConsensusAlarms": { callers: ownerCallers, request: empty },
  "Management.BackupCluster": { callers: ownerCallers, request: empty },
  "Management.GetClusterHealth": { callers: ownerCallers, request: empty },
  "Management.DisarmConsensusAlarm": {
    callers: ownerCallers,
    request: () =>
      fc.record({
        memberId: fc.oneof(fc.constant(memberId), fc.stringMatching(/^[0-9a-f]{1,16}$/), text),
        alarm: enumValue(enumValues(api.ConsensusAlarmType)),
      }),
  },
};

// ── Running a case ─────────────────────────────────────────────────────────

/** The channel of `caller` for one case, and how to let go of it. */
async function channelOf(caller: Caller): Promise<{ client: Client; release: () => void }> {
  let tls: Tls | undefined;
  if (caller === "ephemeral") tls = await cluster.ephemeralTls(newKeys().privateKey);
  else if (caller === "ephemeral standby") {
    const standby = await cluster.registerNode();
    await cluster.approve(standby.nodeId);
    tls = await cluster.ephemeralTls(standby.keys.privateKey);
  } else if (caller !== "none") tls = fixedTls[caller];
  const client = new Client(cluster.leader.address, cluster.credentials(tls));
  return { client, release: () => client.close() };
}

/** Statuses that are no clear answer to a request. */
const unclear = new Set([
  status.INTERNAL,
  status.UNKNOWN,
  status.DATA_LOSS,
  status.UNAVAILABLE,
  status.DEADLINE_EXCEEDED,
  status.CANCELLED,
]);

/** grpc-js' answer to bytes that do not decode as the request message: its own, before any handler. */
const undecodable = (o: Outcome) =>
  o.code === status.INTERNAL && o.details.startsWith("Error deserializing request");

function describeOutcome(o: Outcome): string {
  const details =
    o.details.length > 200
      ? `${o.details.slice(0, 200)}… (${o.details.length} characters)`
      : o.details;
  return `${codeName(o)}: ${details}`;
}

/** A call every caller gets answered: the server still serves this channel. */
const knownGood: GrpcMethod = (() => {
  const found = grpcMethods().find((x) => x.key === "CuratorLocal.GetCACertificate");
  if (found === undefined) throw new Error("CuratorLocal.GetCACertificate is gone");
  return found;
})();

/** Outcomes seen per RPC, e.g. `{ "Management.GetNodes": { OK: 97, PERMISSION_DENIED: 40, … } }`. */
const seen: Record<string, Record<string, number>> = {};

function count(key: string, c: FuzzCase, outcome: Outcome): void {
  const name = `${codeName(outcome)}${c.message.raw ? " (raw)" : ""}`;
  const counts = (seen[key] ??= {});
  counts[name] = (counts[name] ?? 0) + 1;
}

/** Runs one case of `m`; throws what went wrong. */
async function runCase(m: GrpcMethod, c: FuzzCase): Promise<void> {
  const { client, release } = await channelOf(c.caller);
  try {
    const payload = c.message.raw ? c.message.bytes : c.message.request;
    const size = c.message.raw
      ? c.message.bytes.length
      : m.definition.requestSerialize(c.message.request).length;
    const before = await cluster.revision();
    const outcome = await invoke(client, m, payload, { deadlineMs, raw: c.message.raw });
    count(m.key, c, outcome);
    if (unclear.has(outcome.code) && !(c.message.raw && undecodable(outcome))) {
      throw new Error(`${m.key} as ${c.caller} (${size} bytes) ended ${describeOutcome(outcome)}`);
    }
    // grpc-js reads a unary or server-streaming call's message before its
    // handler runs; a client-and-server stream's handler runs first, and may
    // refuse its caller before the message is read.
    const tooLarge = m.definition.requestStream
      ? outcome.code === status.OK
      : outcome.code !== status.RESOURCE_EXHAUSTED;
    if (size > maxRequestBytes && tooLarge) {
      throw new Error(
        `${m.key} as ${c.caller}: a request of ${size} bytes (limit ${maxRequestBytes}) ended ${describeOutcome(outcome)}, not RESOURCE_EXHAUSTED`,
      );
    }
    if (outcome.code !== status.OK) {
      const after = await cluster.revision();
      if (after !== before) {
        throw new Error(
          `${m.key} as ${c.caller} was refused (${describeOutcome(outcome)}) but etcd moved from revision ${before} to ${after}`,
        );
      }
    }
    const still = await invoke(client, knownGood, {}, { deadlineMs });
    if (still.code !== status.OK) {
      throw new Error(
        `after ${m.key}, the server answers a known-good call ${describeOutcome(still)}`,
      );
    }
  } finally {
    release();
  }
}

/** A case's short form in fast-check's reports (requests can be hundreds of KiB). */
function summarized(c: FuzzCase): FuzzCase {
  const summary = () => {
    if (c.message.raw) {
      const head = c.message.bytes.subarray(0, 32).toString("hex");
      return `${c.caller}, raw ${c.message.bytes.length} bytes: ${head}${c.message.bytes.length > 32 ? "…" : ""}`;
    }
    const json = JSON.stringify(c.message.request, (_k, v: unknown) =>
      v instanceof Map
        ? Object.fromEntries(v)
        : v instanceof Uint8Array
          ? Buffer.from(v).toString("hex")
          : v,
    );
    return `${c.caller}, ${json.length > 400 ? `${json.slice(0, 400)}… (${json.length} characters)` : json}`;
  };
  return Object.assign(c, { [fc.toStringMethod]: summary });
}

function cases(target: Target): fc.Arbitrary<FuzzCase> {
  const request = target.request();
  return fc
    .record({
      caller: fc.oneof(
        { weight: 2, arbitrary: fc.constantFrom(...target.callers.authorized) },
        ...(target.callers.refused.length > 0
          ? [{ weight: 1, arbitrary: fc.constantFrom(...target.callers.refused) }]
          : []),
      ),
      message: fc.oneof(
        { weight: 3, arbitrary: request.map((request) => ({ raw: false as const, request })) },
        { weight: 1, arbitrary: rawRequest.map((b) => ({ raw: true as const, bytes: b })) },
      ),
    })
    .map(summarized);
}

// ── The properties ─────────────────────────────────────────────────────────

const methods = grpcMethods().filter((m) => fuzzedServices.includes(m.service));

it("has a fuzz target for every RPC of the fuzzed services", () => {
  const all = Object.keys(targets);
  expect(methods.map((m) => m.key).filter((k) => !all.includes(k))).toEqual([]);
  expect(all.filter((k) => !methods.some((m) => m.key === k))).toEqual([]);
});

it.each(methods.map((m) => [m.key, m] as const))(
  "%s: every generated request gets a clear answer, and a refused one changes nothing",
  async (key, m) => {
    const target = targets[key];
    if (target === undefined) throw new Error(`no fuzz target for ${key}: add one to \`targets\``);
    const details = await fc.check(
      fc.asyncProperty(cases(target), (c) => runCase(m, c)),
      { numRuns: runs, seed: seedOf(key), path: replayPath, endOnFailure: !shrink },
    );
    if (process.env.METROPOLIS_FUZZ_STATS === "1") {
      const counts = Object.entries(seen[key] ?? {}).sort(([a], [b]) => a.localeCompare(b));
      console.log(`${key}: ${counts.map(([name, n]) => `${name} ${n}`).join(", ")}`);
    }
    if (details.failed) {
      const error = details.errorInstance;
      throw new Error(
        [
          `${key} failed: ${error instanceof Error ? error.message : String(error)}`,
          `replay: METROPOLIS_FUZZ_SEED=${seed} METROPOLIS_FUZZ_PATH=${details.counterexamplePath ?? ""} npx jest packages/curator/test/fuzz.test.ts -t '${key}'`,
          `case: ${details.counterexample ? fc.stringify(details.counterexample[0]) : "?"}`,
        ].join("\n"),
      );
    }
  },
  Math.max(120_000, runs * 2_000),
);
