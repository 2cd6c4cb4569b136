/**
 * The consensus service: this node's etcd member, run as a supervised child
 * process, driven by a small XState machine.
 *
 *   preparing ──▶ starting ──▶ bootstrapping ──▶ running (healthy)
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
 * - starting: runs etcd (`root.….consensus.etcd`) and the learner
 *   autopromoter as children, and waits until the member serves.
 * - bootstrapping: stores the etcd CA in etcd, so that any member can issue
 *   the peer certificate of a joining node.
 * - running: publishes `status` as running, with the client and the
 *   membership operations.
 *
 * A crash of the etcd process restarts only that child; the client
 * reconnects by itself. Any other failure fails the service, which the
 * supervisor restarts with a fresh machine.
 */
import { access, mkdir, rm } from "node:fs/promises";
import { constants as fsConstants } from "node:fs";
import { delimiter, isAbsolute, join } from "node:path";
import type { Etcd3 } from "etcd3";
import { MemoryValue } from "@metropolis/event";
import type { NodeRoot } from "@metropolis/localstorage";
import {
  commandRunnable,
  machineRunnable,
  type RunContext,
  type Runnable,
  type SupervisedInput,
} from "@metropolis/supervisor";
import { assign, fromPromise, setup } from "xstate";
import { certificatePemCodec, privateKeyPemCodec, publicKeyFromPrivateKey } from "@metropolis/pki";
import { ConsensusClient } from "./consensus-client";
import { isServing, memberClient, waitReady } from "./etcd-client";
import { etcdArgs, type EtcdPeer, type EtcdTimings } from "./etcd-flags";
import { logEtcdLine } from "./etcd-log";
import { ConsensusConfigError, EtcdNotInstalledError } from "./errors";
import { addLearner, promoteStartedLearners, removeMember } from "./membership";
import { abortableDelay } from "./abortable-delay";
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
  /** How often the leader promotes started learners. Default 5 s. */
  autopromoteIntervalMs?: number;
}

/** How `preparing` decided to start the member. */
interface Plan {
  clusterState: "new" | "existing";
  initialCluster: EtcdPeer[];
  /** Set when bootstrapping: the new CA, to store once etcd serves. */
  newCa?: PeerCa;
  tls: PeerTlsFiles;
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
    storeCa: fromPromise<void, { service: ConsensusService; client: Etcd3; ca: PeerCa }>(
      ({ input }) => input.service.storeCa(input.client, input.ca),
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
          { target: "running", actions: assign({ client: ({ event }) => event.output }) },
        ],
      },
    },
    bootstrapping: {
      invoke: {
        src: "storeCa",
        input: ({ context }) => ({
          service: context.service,
          client: context.client!,
          ca: context.plan!.newCa!,
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

  constructor(private readonly config: ConsensusConfig) {
    if (config.bootstrap && config.join) {
      throw new ConsensusConfigError("consensus: bootstrap and join are mutually exclusive");
    }
  }

  /** The runnable to supervise, e.g. `ctx.run("consensus", service.run)`. */
  readonly run: Runnable = async (ctx) => {
    try {
      await machineRunnable(consensusMachine, { input: { service: this } })(ctx);
    } finally {
      this.status.set({ state: "stopped" });
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
    return join(this.config.storage.ephemeral.consensus.fullPath, "client.sock:0");
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

    let plan: Omit<Plan, "tls">;
    if (await exists(join(storage.data.etcd.data.fullPath, "member"))) {
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
      plan = { clusterState: "new", initialCluster: [self], newCa };
    } else if (this.config.join) {
      const join = this.config.join;
      ctx.logger.info(
        `no etcd data on disk: joining the cluster of ${join.peers.map((p) => p.name).join(", ")}`,
      );
      await checkMemberCertificate(join.caCertificate, join.certificate, nodePrivateKey);
      await saveTls(join.caCertificate, join.certificate);
      plan = { clusterState: "existing", initialCluster: join.peers };
    } else {
      throw new ConsensusConfigError(
        `consensus: no etcd data in ${storage.data.etcd.data.fullPath}, and neither bootstrap nor join data given`,
      );
    }
    // Parsed, not copied: a broken file fails here, named, instead of in etcd.
    const tls = await writePeerTlsFiles(
      eph.fullPath,
      peerTlsPem(
        await pkiFiles.caCertificate.as(certificatePemCodec).read(),
        await pkiFiles.certificate.as(certificatePemCodec).read(),
        await pkiFiles.key.as(privateKeyPemCodec).read(),
      ),
    );
    return { ...plan, tls };
  }

  /** starting: runs etcd and the autopromoter, and waits until the member serves. */
  async start(ctx: RunContext, plan: Plan): Promise<Etcd3> {
    const { nodeId, timings } = this.config;
    const args = etcdArgs({
      name: nodeId,
      dataDir: this.config.storage.data.etcd.data.fullPath,
      peerUrl: this.peerUrl,
      clientSocket: "client.sock:0",
      peerTls: plan.tls,
      initialCluster: plan.initialCluster,
      clusterState: plan.clusterState,
      timings,
    });
    const client = memberClient(this.socketPath);
    this.client = client;
    const etcd = commandRunnable(this.config.etcdBinary ?? "etcd", args, {
      cwd: this.config.storage.ephemeral.consensus.fullPath,
      logLine: logEtcdLine,
      // Healthy means serving: a restarted etcd is healthy once clients work again.
      probe: () => isServing(client),
      probeIntervalMs: 20,
      // A member of a cluster that lost quorum takes ~5 s to exit on SIGTERM.
      graceMs: 10_000,
    });
    ctx.run("etcd", async (c) => {
      // A killed etcd leaves its socket behind, and etcd will not listen over it.
      await rm(this.socketPath, { force: true });
      await etcd(c);
    });
    ctx.run("autopromoter", (c) => this.autopromote(c, client));
    await waitReady(client, ctx.signal);
    ctx.logger.info(`member ${nodeId} serves`);
    return client;
  }

  /** bootstrapping: stores the new cluster's etcd CA in etcd. */
  async storeCa(client: Etcd3, ca: PeerCa): Promise<void> {
    await storePeerCa(ConsensusClient.root(client).sub("consensus"), ca);
  }

  /** running: publishes the status. */
  publishRunning(ctx: RunContext, client: Etcd3): void {
    const root = ConsensusClient.root(client);
    const own = root.sub("consensus");
    this.status.set({
      state: "running",
      client: root,
      addNode: async (nodeId, publicKey, address, signal) => {
        const ca = await loadPeerCa(own);
        const certificate = await issueMemberCertificate(ca, publicKey, address.host);
        const peerUrl = this.peerUrlOf(address);
        const peers = await addLearner(client, nodeId, peerUrl, {
          signal: signal ?? ctx.signal,
          logger: ctx.logger,
        });
        return { peers, caCertificate: ca.certificate.der, certificate: certificate.der };
      },
      members: async () => (await client.cluster.memberList({})).members,
      removeNode: (nodeId, address, signal) =>
        removeMember(client, nodeId, address && this.peerUrlOf(address), {
          signal: signal ?? ctx.signal,
          logger: ctx.logger,
        }),
    });
  }

  private async autopromote(ctx: RunContext, client: Etcd3): Promise<void> {
    ctx.healthy();
    const interval = this.config.autopromoteIntervalMs ?? 5000;
    while (!ctx.signal.aborted) {
      await abortableDelay(interval, ctx.signal).catch(() => undefined);
      if (ctx.signal.aborted) break;
      await promoteStartedLearners(client, ctx.logger).catch((e: unknown) =>
        ctx.logger.debug(`autopromoter pass failed: ${String(e)}`),
      );
    }
  }
}

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
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
