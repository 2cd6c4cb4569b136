/**
 * Scenario 2 of the curator benchmark, registration: simulated nodes, a few
 * at a time, each with a fresh key and its own TLS connection: ephemeral
 * certificate → RegisterNode, the owner's ApproveNode, CommitNode → UP with a
 * node certificate. Nodes per second through one leader, and the leader's CPU
 * time per node (the clients share the machine, so the rate is end to end).
 * No target.
 */
import { randomBytes } from "node:crypto";
import { performance } from "node:perf_hooks";
import { curatorClientCredentials, type TlsPem } from "@metropolis/curator";
import {
  createEphemeralCertificate,
  generateKeyPair,
  nodeIdFromPublicKey,
  tlsMaterial,
} from "@metropolis/pki";
import { api, curator as curatorProto, protocolVersion } from "@metropolis/proto";
import type { NodeCredentials } from "@metropolis/roleserve";
import { median, type Row } from "../report";
import type { BenchContext } from "./bench-context";
import type { CuratorProcess } from "./curator-processes";
import { pool, rpc, untilServing } from "./grpc-calls";

/** A node that went through registration: what it needs to talk to the curator as itself. */
export interface RegisteredNode {
  nodeId: string;
  tls: TlsPem;
  /** The same identity as the node keeps it (raw key seed, DER certificates). */
  credentials: NodeCredentials;
}

export interface Registration {
  nodes: RegisteredNode[];
  /** Nodes UP per second. */
  rate: number;
  /** Each node's register → approve → commit, in milliseconds. */
  latencies: number[];
  leaderCpuMsPerNode: number;
}

/** Registers `count` nodes (default: the configured number) through `leader`, a few at a time. */
export async function measureRegistration(
  ctx: BenchContext,
  leader: CuratorProcess,
  count = ctx.config.nodes,
): Promise<Registration> {
  const { cluster } = ctx;
  const { registerConcurrency, rpcDeadlineMs } = ctx.config;
  const address = leader.address;
  const owner = new api.ManagementClient(
    address,
    curatorClientCredentials(cluster.caPem, cluster.owner),
  );
  try {
    // The curator says it leads a moment before its listener serves: retry until it answers.
    const { ticket } = await untilServing(() =>
      rpc<api.GetRegisterTicketRequest, api.GetRegisterTicketResponse>(
        "GetRegisterTicket",
        rpcDeadlineMs,
        owner.getRegisterTicket.bind(owner),
        {},
      ),
    );

    /** One node's way in: register, get approved, commit. */
    const register = async (): Promise<RegisteredNode> => {
      const keys = generateKeyPair();
      const nodeId = nodeIdFromPublicKey(keys.publicKey);
      const ephemeral = await createEphemeralCertificate(keys.privateKey);
      const client = new curatorProto.CuratorClient(
        address,
        curatorClientCredentials(
          cluster.caPem,
          tlsMaterial({ certificate: ephemeral, privateKey: keys.privateKey, ca: ephemeral }),
        ),
      );
      try {
        // Each step is retried while answered UNAVAILABLE (etcd changing its
        // leader under load: the curator says "retry"), as an operator's script would.
        const joinKey = generateKeyPair().publicKey;
        await untilServing(() =>
          rpc<curatorProto.RegisterNodeRequest, curatorProto.RegisterNodeResponse>(
            `RegisterNode of ${nodeId}`,
            rpcDeadlineMs,
            client.registerNode.bind(client),
            { registerTicket: ticket, joinKey, labels: new Map(), protocolVersion },
          ),
        );
        await untilServing(() =>
          rpc<api.ApproveNodeRequest, api.ApproveNodeResponse>(
            `ApproveNode of ${nodeId}`,
            rpcDeadlineMs,
            owner.approveNode.bind(owner),
            { node: { $case: "pubkey", pubkey: keys.publicKey } },
          ),
        );
        const clusterUnlockKey = randomBytes(32);
        const committed = await untilServing(() =>
          rpc<curatorProto.CommitNodeRequest, curatorProto.CommitNodeResponse>(
            `CommitNode of ${nodeId}`,
            rpcDeadlineMs,
            client.commitNode.bind(client),
            { clusterUnlockKey },
          ),
        );
        const tls = tlsMaterial({
          certificate: committed.nodeCertificate,
          privateKey: keys.privateKey,
          ca: committed.caCertificate,
        });
        return {
          nodeId,
          tls,
          credentials: {
            nodeId,
            privateKey: keys.privateKey,
            certificate: committed.nodeCertificate,
            caCertificate: committed.caCertificate,
          },
        };
      } finally {
        client.close();
      }
    };

    const nodes: RegisteredNode[] = [];
    const latencies: number[] = [];
    const cpuBefore = leader.cpuMs();
    const started = performance.now();
    await pool(count, registerConcurrency, async () => {
      const t = performance.now();
      nodes.push(await register());
      latencies.push(performance.now() - t);
      if (nodes.length % 200 === 0) ctx.progress(`(2) ${nodes.length} nodes UP`);
    });
    const seconds = (performance.now() - started) / 1000;
    const leaderCpuMsPerNode = (leader.cpuMs() - cpuBefore) / nodes.length;
    return { nodes, rate: nodes.length / seconds, latencies, leaderCpuMsPerNode };
  } finally {
    owner.close();
  }
}

/** The report rows of the registrations. */
export function registrationRows(ctx: BenchContext, registration: Registration): Row[] {
  return [
    {
      measure: `(2) RegisterNode → UP, ${ctx.config.nodes} nodes, ${ctx.config.registerConcurrency} in flight`,
      value: registration.rate,
      unit: "nodes/s",
    },
    {
      measure: "(2) one node's register → approve → commit, median",
      value: median(registration.latencies),
      unit: "ms",
    },
    {
      measure: "(2) leader process CPU per registered node",
      value: registration.leaderCpuMsPerNode,
      unit: "ms",
    },
  ];
}
