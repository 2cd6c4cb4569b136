/**
 * The consensus service: this node's etcd member, run as a supervised child
 * process, driven by a small XState machine.
 *
 *   preparing ──▶ starting ──▶ bootstrapping ──▶ keyring ──▶ running (healthy)
 *                     │          (new cluster only)  ▲
 *                     └──────────────────────────────┘
 *
 * - preparing: decides how the member starts. etcd data on disk → restart
 *   from it (the cluster remembers the member); else `bootstrap` → a new
 *   one-member cluster, with a new etcd CA; else `join` → join an existing
 *   cluster with what a running member's `addNode()` returned. It writes the
 *   peer TLS material the member uses: durably (the private key encrypted with
 *   the data directory's key) and as plain files in the ephemeral directory,
 *   for etcd to read.
 * - starting: runs etcd (`root.….consensus.etcd`) as a child, waits
 *   until the member serves, then runs the children that read it: the
 *   learner autopromoter and the peer CRL follower. A join etcd gives up
 *   for now (a running member answered too late) is started again.
 * - bootstrapping: makes the cluster secrets keyring and this member's
 *   wrapped copy of it (keyring-membership.ts), and stores the etcd CA in
 *   etcd, sealed with it, so that any member can issue the peer certificate
 *   of a joining node.
 * - keyring: runs the keyring follower (`root.….consensus.keyring`), which
 *   loads this member's wrapped copy of the keyring and follows its changes,
 *   and waits until the keyring is loaded: a member whose clients cannot open
 *   the cluster's secrets is not running.
 * - running: publishes `status` as running, with the client (its sealers use
 *   the keyring), the membership operations and the key rotation.
 *
 * A crash of the etcd process restarts only that child; the client
 * reconnects by itself. Any other failure fails the service, which the
 * supervisor restarts with a fresh machine.
 *
 * Except one exit: etcd reporting that its cluster removed this member
 * (etcd-log.ts). Then `status` turns `removed` and etcd is not started from
 * that data again, by this service or a restart of its etcd child: the
 * member's owner (the control plane) may now delete the data, on etcd's own
 * word rather than on anyone's say-so.
 */
import { access, mkdir, rm, writeFile } from "node:fs/promises";
import { constants as fsConstants } from "node:fs";
import { delimiter, isAbsolute, join } from "node:path";
import type { Etcd3 } from "etcd3";
import { MemoryValue } from "@metropolis/event";
import type { NodeRoot } from "@metropolis/localstorage";
import { abortableSleep, type RunContext, type Runnable } from "@metropolis/supervisor";
import { logProgress } from "@metropolis/supervisor/node-progress";
import { commandRunnable } from "@metropolis/supervisor/process";
import { machineRunnable, type SupervisedInput } from "@metropolis/supervisor/xstate";
import { assign, fromPromise, setup } from "xstate";
import {
  certificatePemCodec,
  parseCertificate,
  privateKeyPemCodec,
  publicKeyFromPrivateKey,
} from "@metropolis/pki";
import { waitFor } from "@metropolis/event";
import { ClusterSecrets } from "./cluster-secrets";
import { ConsensusClient } from "./consensus-client";
import { isServing, memberClient, waitReady } from "./etcd-client";
import { etcdArgs, type EtcdPeer, type EtcdTimings } from "./etcd-flags";
import { logEtcdLine, refusesJoinForNow, reportsMemberRemoved } from "./etcd-log";
import { hasMemberData } from "./member-data";
import {
  ConsensusConfigError,
  EtcdNotInstalledError,
  MemberRemovedError,
  MembershipError,
} from "./errors";
import { clientSocketName, memberSocketPath } from "./member-socket";
import { keyringFollower } from "./keyring-follower";
import { wrapKeyring } from "./keyring-wrap";
import { bootstrapKeyring, dropMemberCopy, wrapForMember } from "./keyring-membership";
import { addLearner, promoteStartedLearners, removeMember } from "./membership";
import { readRaftStatus } from "./raft-status";
import { rotateSecretsKey } from "./rotation";
import {
  loadPeerCrl,
  peerCrlFollower,
  recordMemberCertificate,
  revokeMemberCertificates,
} from "./peer-revocation";
import {
  checkMemberCertificate,
  createPeerCa,
  issueMemberCertificate,
  loadPeerCa,
  peerTlsPem,
  storePeerCa,
  writePeerTlsFiles,
  type PeerCa,
  type PeerTlsFiles,
} from "./peer-pki";
import type { ConsensusStatus, JoinCluster, PeerAddress } from "./status";

/** The CRL etcd reads, in the ephemeral consensus directory. */
const peerCrlFileName = "peer-crl.der";

/**
 * How long a joining member's etcd is started again while it gives the join
 * up for now (etcd-log.ts `refusesJoinForNow`), and how often.
 */
const joinSettleMs = 20_000;
const joinRetryMs = 1000;

/** Default port of etcd's peer traffic. */
export const defaultPeerPort = 7834;

export interface ConsensusConfig {
  /** This node's ID; also its etcd member name. */
  nodeId: string;
  /** This node's Ed25519 private key (32-byte seed, as @metropolis/pki keeps keys); its peer certificate is issued for it. */
  nodePrivateKey: Uint8Array;
  /** The node's storage, placed, with its data directory mounted. */
  storage: NodeRoot;
  /** Where peers reach this member. */
  peer: PeerAddress;
  /** Start a new one-member cluster (used only when there is no etcd data on disk). */
  bootstrap?: boolean;
  /** Join an existing cluster (used only when there is no etcd data on disk). */
  join?: JoinCluster;
  /** Raft timings; etcd's defaults when unset. */
  timings?: EtcdTimings;
  /** The etcd binary. Default `etcd` on PATH. */
  etcdBinary?: string;
  /**
   * How often the leader promotes started learners.
   * @default {@link defaultAutopromoteIntervalMs}
   */
  autopromoteIntervalMs?: number;
  /** How often the keyring follower polls while its copy is missing or it is a learner. Default 250 ms. */
  keyringPollIntervalMs?: number;
}

/** How often a member's autopromoter looks for learners to promote, unless configured. */
export const defaultAutopromoteIntervalMs = 5000;

/** How `preparing` decided to start the member. */
interface Plan {
  clusterState: "new" | "existing";
  initialCluster: EtcdPeer[];
  /** Set when bootstrapping: the new CA, to store once etcd serves. */
  newCa?: PeerCa;
  tls: PeerTlsFiles;
  /** The etcd CA certificate (DER), which signs the CRLs etcd is given. */
  caCertificate: Uint8Array;
  /** The CRL etcd reads (`--peer-crl-file`), when the member knows one. */
  crlFile?: string;
}

interface MachineInput extends SupervisedInput {
  service: ConsensusService;
}

interface MachineContext extends MachineInput {
  plan?: Plan;
  client?: Etcd3;
}

const consensusMachine = setup({
  types: {
    input: {} as MachineInput,
    context: {} as MachineContext,
  },
  actors: {
    prepare: fromPromise<Plan, MachineInput>(({ input }) => input.service.prepare(input.ctx)),
    start: fromPromise<Etcd3, MachineInput & { plan: Plan }>(({ input }) =>
      input.service.start(input.ctx, input.plan),
    ),
    bootstrapSecrets: fromPromise<void, { service: ConsensusService; client: Etcd3; ca: PeerCa }>(
      ({ input }) => input.service.bootstrapSecrets(input.client, input.ca),
    ),
    loadKeyring: fromPromise<void, MachineInput & { client: Etcd3 }>(({ input }) =>
      input.service.loadKeyring(input.ctx, input.client),
    ),
  },
  actions: {
    publishRunning: ({ context }) => context.service.publishRunning(context.ctx, context.client!),
  },
  guards: {
    isNewCluster: ({ context }) => context.plan?.newCa !== undefined,
  },
}).createMachine({
  id: "consensus",
  context: ({ input }) => ({ ...input }),
  initial: "preparing",
  states: {
    preparing: {
      invoke: {
        src: "prepare",
        input: ({ context }) => ({ ctx: context.ctx, service: context.service }),
        onDone: { target: "starting", actions: assign({ plan: ({ event }) => event.output }) },
      },
    },
    starting: {
      invoke: {
        src: "start",
        input: ({ context }) => ({
          ctx: context.ctx,
          service: context.service,
          plan: context.plan!,
        }),
        onDone: [
          {
            guard: "isNewCluster",
            target: "bootstrapping",
            actions: assign({ client: ({ event }) => event.output }),
          },
          { target: "keyring", actions: assign({ client: ({ event }) => event.output }) },
        ],
      },
    },
    bootstrapping: {
      invoke: {
        src: "bootstrapSecrets",
        input: ({ context }) => ({
          service: context.service,
          client: context.client!,
          ca: context.plan!.newCa!,
        }),
        onDone: "keyring",
      },
    },
    keyring: {
      invoke: {
        src: "loadKeyring",
        input: ({ context }) => ({
          ctx: context.ctx,
          service: context.service,
          client: context.client!,
        }),
        onDone: "running",
      },
    },
    running: { tags: ["healthy"], entry: "publishRunning" },
  },
});

export class ConsensusService {
  /** `running` with a client while the member serves; `stopped` otherwise. */
  readonly status = new MemoryValue<ConsensusStatus>({ state: "stopped" });
  private client: Etcd3 | undefined;
  /** Set once etcd reported this member's removal: final (see the module comment). */
  private removed = false;
  /** Set when etcd's last start gave a join up for now (etcd-log.ts `refusesJoinForNow`). */
  private joinRefused = false;
  /** This member's cluster secrets keyring; a fresh one for every run. */
  private secrets = new ClusterSecrets();

  constructor(private readonly config: ConsensusConfig) {
    if (config.bootstrap && config.join) {
      throw new ConsensusConfigError("consensus: bootstrap and join are mutually exclusive");
    }
  }

  /** The runnable to supervise, e.g. `ctx.run("consensus", service.run)`. */
  readonly run: Runnable = async (ctx) => {
    this.secrets = new ClusterSecrets();
    try {
      await machineRunnable(consensusMachine, { input: { service: this } })(ctx);
    } finally {
      this.status.set({ state: this.removed ? "removed" : "stopped" });
      const client = this.client;
      this.client = undefined;
      client?.close();
    }
  };

  private get peerUrl(): string {
    return this.peerUrlOf(this.config.peer);
  }

  private peerUrlOf(address: PeerAddress): string {
    return `https://${address.host}:${address.port ?? defaultPeerPort}`;
  }

  private get socketPath(): string {
    return memberSocketPath(this.config.storage.ephemeral.consensus.fullPath, clientSocketName);
  }

  /** preparing: decides how to start, and writes the TLS material. */
  async prepare(ctx: RunContext): Promise<Plan> {
    const { storage, nodeId, nodePrivateKey } = this.config;
    const binary = await findBinary(this.config.etcdBinary ?? "etcd");
    ctx.logger.debug(`using ${binary}`);
    const eph = storage.ephemeral.consensus;
    await mkdir(eph.fullPath, { recursive: true, mode: 0o700 });
    await storage.data.etcd.mkdirAll();
    const self: EtcdPeer = { name: nodeId, peerUrl: this.peerUrl };
    const pkiFiles = storage.data.etcd.peerPKI;
    const saveTls = async (caDer: Uint8Array, certificateDer: Uint8Array) => {
      const pem = peerTlsPem(caDer, certificateDer, nodePrivateKey);
      await pkiFiles.caCertificate.write(Buffer.from(pem.caCertificate));
      await pkiFiles.certificate.write(Buffer.from(pem.certificate));
      await pkiFiles.key.write(Buffer.from(pem.privateKey));
    };

    let plan: Omit<Plan, "tls" | "caCertificate" | "crlFile">;
    if (await hasMemberData(storage)) {
      ctx.logger.info("etcd data found on disk: restarting the member from it");
      plan = { clusterState: "existing", initialCluster: [self] };
    } else if (this.config.bootstrap) {
      ctx.logger.info("no etcd data on disk: bootstrapping a new cluster");
      const newCa = await createPeerCa();
      const certificate = await issueMemberCertificate(
        newCa,
        publicKeyFromPrivateKey(nodePrivateKey),
        this.config.peer.host,
      );
      await saveTls(newCa.certificate.der, certificate.der);
      await storage.data.etcd.peerCRL.write((await newCa.createCrl()).der);
      plan = { clusterState: "new", initialCluster: [self], newCa };
    } else if (this.config.join) {
      const join = this.config.join;
      ctx.logger.info(
        `no etcd data on disk: joining the cluster of ${join.peers.map((p) => p.name).join(", ")}`,
      );
      await checkMemberCertificate(join.caCertificate, join.certificate, nodePrivateKey);
      await saveTls(join.caCertificate, join.certificate);
      if (join.crl.length > 0) await storage.data.etcd.peerCRL.write(Buffer.from(join.crl));
      plan = { clusterState: "existing", initialCluster: join.peers };
    } else {
      throw new ConsensusConfigError(
        `consensus: no etcd data in ${storage.data.etcd.data.fullPath}, and neither bootstrap nor join data given`,
      );
    }
    // Parsed, not copied: a broken file fails here, named, instead of in etcd.
    const caCertificate = await pkiFiles.caCertificate.as(certificatePemCodec).read();
    const tls = await writePeerTlsFiles(
      eph.fullPath,
      peerTlsPem(
        caCertificate,
        await pkiFiles.certificate.as(certificatePemCodec).read(),
        await pkiFiles.key.as(privateKeyPemCodec).read(),
      ),
    );
    // etcd refuses every peer connection when --peer-crl-file does not read, so the
    // flag is given only with a CRL in hand (a member that joined before CRLs were
    // handed out gets one from the follower, for its next start).
    let crlFile: string | undefined;
    if (await storage.data.etcd.peerCRL.exists()) {
      crlFile = join(eph.fullPath, peerCrlFileName);
      await writeFile(crlFile, await storage.data.etcd.peerCRL.read());
    }
    return { ...plan, tls, crlFile, caCertificate };
  }

  /** starting: runs etcd, waits until the member serves, then runs the autopromoter and the peer CRL follower. */
  async start(ctx: RunContext, plan: Plan): Promise<Etcd3> {
    const { nodeId, timings } = this.config;
    const args = etcdArgs({
      name: nodeId,
      dataDir: this.config.storage.data.etcd.data.fullPath,
      peerUrl: this.peerUrl,
      clientSocket: clientSocketName,
      peerTls: { ...plan.tls, crlFile: plan.crlFile },
      initialCluster: plan.initialCluster,
      clusterState: plan.clusterState,
      timings,
    });
    const client = memberClient(this.socketPath);
    this.client = client;
    const etcd = commandRunnable(this.config.etcdBinary ?? "etcd", args, {
      cwd: this.config.storage.ephemeral.consensus.fullPath,
      logLine: (line, stream, logger) => {
        logEtcdLine(line, stream, logger);
        if (reportsMemberRemoved(line)) this.removed = true;
        if (refusesJoinForNow(line)) this.joinRefused = true;
      },
      // Healthy means serving: a restarted etcd is healthy once clients work again.
      probe: () => isServing(client),
      probeIntervalMs: 20,
      // A member of a cluster that lost quorum takes ~5 s to exit on SIGTERM.
      graceMs: 10_000,
    });
    ctx.run("etcd", (c) => this.runEtcd(c, etcd));
    await waitReady(client, ctx.signal);
    // The followers read etcd, so they start once it serves: a join that etcd
    // gives up for now (runEtcd) is no failure of theirs.
    ctx.run("autopromoter", (c) => this.autopromote(c, client));
    ctx.run(
      "peercrl",
      peerCrlFollower({
        client,
        consensus: ConsensusClient.root(client, this.secrets).sub("consensus"),
        caCertificate: plan.caCertificate,
        durable: this.config.storage.data.etcd.peerCRL,
        ephemeralPath: join(this.config.storage.ephemeral.consensus.fullPath, peerCrlFileName),
      }),
    );
    logProgress(ctx.logger, `member ${nodeId} serves`, { event: "consensus.serving", nodeId });
    return client;
  }

  /**
   * The etcd child. A removed member is never started from its data again
   * (see the module comment). A join that etcd gives up for now (it could
   * not yet read a running member's version: etcd-log.ts `refusesJoinForNow`)
   * is started again here, every second for up to 20 s, rather than failed:
   * the supervisor would restart it too, but as a failure, which reads as a
   * broken member (and failed a test of a join in CI on a loaded machine).
   */
  private async runEtcd(c: RunContext, etcd: Runnable): Promise<void> {
    if (this.removed) return c.untilAborted();
    const joinSettledBy = Date.now() + joinSettleMs;
    for (;;) {
      // A killed etcd leaves its socket behind, and etcd will not listen over it.
      await rm(this.socketPath, { force: true });
      this.joinRefused = false;
      try {
        await etcd(c);
        break;
      } catch (e) {
        if (this.removed) break;
        if (!this.joinRefused || Date.now() >= joinSettledBy) throw e;
      }
      c.logger.warn(
        `etcd could not yet check its version against the running members to join them; starting it again in ${joinRetryMs} ms`,
      );
      await abortableSleep(joinRetryMs, c.signal).catch(() => undefined);
      if (c.signal.aborted) return;
    }
    if (!this.removed) return;
    this.status.set({ state: "removed" });
    throw new MemberRemovedError(this.config.nodeId);
  }

  /**
   * bootstrapping: makes the new cluster's keyring (with this member's
   * copy), then stores the etcd CA in etcd, sealed with it.
   */
  async bootstrapSecrets(client: Etcd3, ca: PeerCa): Promise<void> {
    const { nodeId, nodePrivateKey } = this.config;
    const root = ConsensusClient.root(client, this.secrets);
    await bootstrapKeyring(root.kv, this.secrets, nodeId, publicKeyFromPrivateKey(nodePrivateKey));
    await storePeerCa(root.sub("consensus"), ca);
    // Its own peer certificate, recorded like every other member's (peer-revocation.ts).
    const own = this.config.storage.data.etcd.peerPKI.certificate;
    const certificate = parseCertificate(await own.as(certificatePemCodec).read());
    await recordMemberCertificate(root.sub("consensus"), nodeId, certificate);
  }

  /** keyring: follows this member's copy of the keyring, and waits until it is loaded. */
  async loadKeyring(ctx: RunContext, client: Etcd3): Promise<void> {
    ctx.run(
      "keyring",
      keyringFollower({
        client,
        nodeId: this.config.nodeId,
        nodePrivateKey: this.config.nodePrivateKey,
        secrets: this.secrets,
        pollIntervalMs: this.config.keyringPollIntervalMs,
      }),
    );
    await waitFor(this.secrets.loaded, (loaded) => loaded !== undefined, ctx.signal);
  }

  /** running: publishes the status. */
  publishRunning(ctx: RunContext, client: Etcd3): void {
    const secrets = this.secrets;
    const root = ConsensusClient.root(client, secrets);
    const own = root.sub("consensus");
    this.status.set({
      state: "running",
      client: root,
      clientSocket: this.socketPath,
      addNode: async (nodeId, publicKey, address, signal) => {
        // The copy goes first, so that the member finds it when it starts.
        await wrapForMember(root.kv, secrets, nodeId, publicKey);
        const ca = await loadPeerCa(own);
        const certificate = await issueMemberCertificate(ca, publicKey, address.host);
        await recordMemberCertificate(own, nodeId, certificate);
        const peerUrl = this.peerUrlOf(address);
        const peers = await addLearner(client, nodeId, peerUrl, {
          signal: signal ?? ctx.signal,
          logger: ctx.logger,
        });
        const crl = await loadPeerCrl(own);
        return {
          peers,
          caCertificate: ca.certificate.der,
          certificate: certificate.der,
          crl: crl.der,
        };
      },
      members: async () => (await client.cluster.memberList({})).members,
      confirmMember: (timeoutMs = 5_000) => this.confirmMember(client, timeoutMs),
      raftStatus: (timeoutMs) => readRaftStatus(client, this.socketPath, timeoutMs),
      removeNode: async (nodeId, address, signal) => {
        const removed = await removeMember(client, nodeId, address && this.peerUrlOf(address), {
          signal: signal ?? ctx.signal,
          logger: ctx.logger,
        });
        await dropMemberCopy(root.kv, secrets, nodeId);
        return removed;
      },
      revokeNode: (nodeId) => revokeMemberCertificates(own, nodeId),
      rotateSecretsKey: (guard, signal) =>
        rotateSecretsKey(
          { kv: root.kv, secrets, nodeId: this.config.nodeId, logger: ctx.logger },
          guard,
          signal ?? ctx.signal,
        ),
      wrapKeyringFor: (recipientPublicKey, at) =>
        wrapKeyring(secrets.keyring("wrap it for a backup"), recipientPublicKey, at),
    });
  }

  private async confirmMember(client: Etcd3, timeoutMs: number): Promise<boolean> {
    const ask = async () => {
      // Linearizable (not serializable): answered only with the leader's read index,
      // so every membership change committed before it is applied here by then.
      await client.get("consensus-membership-probe").exec();
      const { members } = await client.cluster.memberList({});
      return members.some((m) => m.name === this.config.nodeId);
    };
    const timeout = new AbortController();
    try {
      return await Promise.race([
        ask(),
        abortableSleep(timeoutMs, timeout.signal).then(() => {
          throw new MembershipError(
            `no quorum answered within ${timeoutMs} ms: whether ${this.config.nodeId} is a member is unknown`,
          );
        }),
      ]);
    } finally {
      timeout.abort();
    }
  }

  private async autopromote(ctx: RunContext, client: Etcd3): Promise<void> {
    ctx.healthy();
    const interval = this.config.autopromoteIntervalMs ?? defaultAutopromoteIntervalMs;
    while (!ctx.signal.aborted) {
      await abortableSleep(interval, ctx.signal).catch(() => undefined);
      if (ctx.signal.aborted) break;
      await promoteStartedLearners(client, ctx.logger).catch((e: unknown) =>
        ctx.logger.debug(`autopromoter pass failed: ${String(e)}`),
      );
    }
  }
}

/** The absolute path of `binary`, searched on PATH; a clear error naming the package when absent. */
async function findBinary(binary: string): Promise<string> {
  const candidates = isAbsolute(binary)
    ? [binary]
    : (process.env.PATH ?? "")
        .split(delimiter)
        .filter(Boolean)
        .map((d) => join(d, binary));
  for (const c of candidates) {
    if (
      await access(c, fsConstants.X_OK).then(
        () => true,
        () => false,
      )
    )
      return c;
  }
  throw new EtcdNotInstalledError(binary);
}
