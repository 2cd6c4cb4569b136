import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { api, common, curator, priv } from "@metropolis/proto";

const key = (fill: number): Buffer => Buffer.alloc(32, fill);

describe("NodeParameters", () => {
  it("round-trips the cluster_bootstrap arm", () => {
    const params = api.NodeParameters.fromPartial({
      cluster: {
        $case: "clusterBootstrap",
        clusterBootstrap: { ownerPublicKey: key(1), labels: new Map([["zone", "a"]]) },
      },
    });
    const decoded = api.NodeParameters.decode(api.NodeParameters.encode(params).finish());
    expect(decoded).toEqual(params);
    expect(decoded.cluster?.$case).toBe("clusterBootstrap");
  });

  it("round-trips the cluster_register arm", () => {
    const params = api.NodeParameters.fromPartial({
      cluster: {
        $case: "clusterRegister",
        clusterRegister: {
          registerTicket: Buffer.from("ticket"),
          clusterDirectory: {
            nodes: [
              {
                id: "metropolis-0202",
                publicKey: key(2),
                addresses: [{ host: "10.0.0.2" }, { host: "node2.example" }],
              },
            ],
          },
          caCertificate: Buffer.from([0x30, 0x82, 0x01, 0x0a]),
          labels: new Map([
            ["rack", "r1"],
            ["zone", "b"],
          ]),
        },
      },
    });
    const bytes = api.NodeParameters.encode(params).finish();
    // Field 2 (cluster_register), length-delimited: the arm is on the wire.
    expect(bytes[0]).toBe((2 << 3) | WireType.LengthDelimited);
    const decoded = api.NodeParameters.decode(bytes);
    expect(decoded).toEqual(params);
    if (decoded.cluster?.$case !== "clusterRegister") throw new Error("wrong oneof arm");
    expect(decoded.cluster.clusterRegister.clusterDirectory?.nodes[0]?.addresses).toHaveLength(2);
  });

  it("decodes an empty message as no arm", () => {
    expect(api.NodeParameters.decode(new Uint8Array()).cluster).toBeUndefined();
  });
});

describe("private records", () => {
  it("round-trips a Node with roles, status and labels", () => {
    const node = priv.Node.fromPartial({
      publicKey: key(3),
      joinKey: key(4),
      state: common.NodeState.UP,
      roles: { consensusMember: common.NodeRoles_ConsensusMember.create(), kubernetesWorker: {} },
      status: {
        externalAddress: "10.0.0.3",
        runningCurator: { port: 7835 },
        version: "0.1.0",
        bootId: "6f1c2d3e",
        timestamp: new Date("2025-01-02T03:04:05.678Z"),
      },
      labels: new Map([["zone", "a"]]),
    });
    const decoded = priv.Node.decode(priv.Node.encode(node).finish());
    expect(decoded).toEqual(node);
    // A role is held when its field is set.
    expect(decoded.roles?.consensusMember).toBeDefined();
    expect(decoded.roles?.kubernetesController).toBeUndefined();
  });

  it("round-trips a SealedConfiguration", () => {
    const sealed = priv.SealedConfiguration.fromPartial({
      nodeUnlockKey: key(6),
      joinKey: key(7),
      clusterCa: Buffer.from([0x30, 0x82]),
      storagePolicy: common.StoragePolicy.AUTHENTICATED_ENCRYPTED,
    });
    const decoded = priv.SealedConfiguration.decode(
      priv.SealedConfiguration.encode(sealed).finish(),
    );
    expect(decoded).toEqual(sealed);
  });

  it("keeps the full enum value names in JSON", () => {
    expect(common.nodeStateToJSON(common.NodeState.UP)).toBe("NODE_STATE_UP");
    expect(common.storagePolicyFromJSON("STORAGE_POLICY_INSECURE")).toBe(
      common.StoragePolicy.INSECURE,
    );
    expect(
      curator.WatchResponse.toJSON({
        nodes: [],
        nodeTombstones: [{ nodeId: "metropolis-01" }],
        progress: curator.WatchResponse_Progress.LAST_BACKLOGGED,
        revision: 0,
        nodeCount: 0,
        resumed: false,
        etcdClusterId: "",
      }),
    ).toEqual({
      nodeTombstones: [{ nodeId: "metropolis-01" }],
      progress: "PROGRESS_LAST_BACKLOGGED",
    });
  });
});

describe("Watch resume token: revision and etcd cluster ID", () => {
  it("round-trips WatchResponse.etcd_cluster_id (field 7) with the revision", () => {
    const event = curator.WatchResponse.fromPartial({
      progress: curator.WatchResponse_Progress.LAST_BACKLOGGED,
      revision: 42,
      nodeCount: 3,
      etcdClusterId: "18446744073709551557",
    });
    const bytes = curator.WatchResponse.encode(event).finish();
    expect(curator.WatchResponse.decode(bytes)).toEqual(event);
    // A uint64 cluster ID in decimal survives whole (no float rounding).
    const only = new BinaryWriter().tag(7, WireType.LengthDelimited).string("12345").finish();
    expect(curator.WatchResponse.decode(only).etcdClusterId).toBe("12345");
  });

  it("round-trips NodesInCluster.resume_etcd_cluster_id (field 2); a request without it has it empty", () => {
    const request = curator.WatchRequest.fromPartial({
      kind: {
        $case: "nodesInCluster",
        nodesInCluster: { resumeFromRevision: 42, resumeEtcdClusterId: "9876543210" },
      },
    });
    const decoded = curator.WatchRequest.decode(curator.WatchRequest.encode(request).finish());
    expect(decoded).toEqual(request);
    // A client older than the field sends the revision alone.
    const older = new BinaryWriter()
      .tag(2, WireType.LengthDelimited)
      .fork()
      .tag(1, WireType.Varint)
      .int64(42)
      .join()
      .finish();
    expect(curator.WatchRequest.decode(older).kind).toEqual({
      $case: "nodesInCluster",
      nodesInCluster: { resumeFromRevision: 42, resumeEtcdClusterId: "" },
    });
  });
});

describe("HeartbeatRequest.consensus_view", () => {
  const view = { memberIds: ["abc1", "abc2"], raftLeaderId: "abc1", raftTerm: 9 };

  it("round-trips the member's database size and quota, fields 4 and 5", () => {
    const request = curator.HeartbeatRequest.fromPartial({
      consensusView: { ...view, databaseSizeBytes: 20_971_520, databaseQuotaBytes: 2 ** 31 },
    });
    const bytes = curator.HeartbeatRequest.encode(request).finish();
    expect(curator.HeartbeatRequest.decode(bytes).consensusView).toEqual({
      ...view,
      databaseSizeBytes: 20_971_520,
      databaseQuotaBytes: 2 ** 31,
    });
    // A zero size is sent (the fields are optional: present, not defaulted away).
    const zero = curator.ConsensusView.encode({ ...view, databaseSizeBytes: 0 }).finish();
    expect(curator.ConsensusView.decode(zero).databaseSizeBytes).toBe(0);
  });

  it("leaves both absent in a view that carries none (a node older than the fields, a failed read)", () => {
    const older = new BinaryWriter()
      .tag(1, WireType.LengthDelimited)
      .string("abc1")
      .tag(2, WireType.LengthDelimited)
      .string("abc1")
      .tag(3, WireType.Varint)
      .uint64(9)
      .finish();
    const decoded = curator.ConsensusView.decode(older);
    expect(decoded).toMatchObject({ memberIds: ["abc1"], raftLeaderId: "abc1", raftTerm: 9 });
    expect(decoded.databaseSizeBytes).toBeUndefined();
    expect(decoded.databaseQuotaBytes).toBeUndefined();
  });
});

describe("decoding invalid bytes", () => {
  const garbage: Array<[string, Uint8Array]> = [
    ["a length beyond the end", Uint8Array.from([0x0a, 0x64, 0x01])],
    ["an invalid wire type", Uint8Array.from([0x0f])],
    ["an endless varint", new Uint8Array(11).fill(0xff)],
  ];

  it.each(garbage)("throws on %s", (_what, bytes) => {
    expect(() => priv.Node.decode(bytes)).toThrow();
    expect(() => api.NodeParameters.decode(bytes)).toThrow();
    expect(() => priv.SealedConfiguration.decode(bytes)).toThrow();
  });

  it("throws on an int64 beyond a JavaScript number's exact range", () => {
    const bytes = new BinaryWriter()
      .tag(8, WireType.Varint)
      .int64(2n ** 60n)
      .finish();
    expect(() => api.Node.decode(bytes)).toThrow(/MAX_SAFE_INTEGER/);
    const ok = new BinaryWriter().tag(8, WireType.Varint).int64(1500).finish();
    expect(api.Node.decode(ok).timeSinceHeartbeatMs).toBe(1500);
  });
});

describe("grpc-js service definitions", () => {
  const services: Array<[string, Record<string, ServiceMethod>, Record<string, Kind>]> = [
    [
      "metropolis.proto.api.Management",
      api.ManagementService,
      {
        GetRegisterTicket: "unary",
        GetClusterInfo: "unary",
        GetNodes: "unary",
        ApproveNode: "unary",
        UpdateNodeRoles: "unary",
        UpdateNodeLabels: "unary",
        DeleteNode: "unary",
        RotateClusterSecretsKey: "unary",
        ConfigureCluster: "unary",
        WatchNodes: "server-stream",
        GetClusterConsensus: "unary",
        WatchClusterConsensus: "server-stream",
        CheckNodeMaintenance: "unary",
        DecommissionNode: "unary",
        RemoveConsensusMember: "unary",
        MoveConsensusLeader: "unary",
        DefragmentConsensus: "unary",
        GetConsensusAlarms: "unary",
        DisarmConsensusAlarm: "unary",
        GetClusterHealth: "unary",
        BackupCluster: "server-stream",
      },
    ],
    ["metropolis.proto.api.AAA", api.AAAService, { Escrow: "unary" }],
    [
      "metropolis.proto.api.Debug",
      api.DebugService,
      {
        GetLogs: "server-stream",
        GetSupervisionTree: "unary",
        GetCondition: "unary",
        WatchSupervisionTree: "server-stream",
        GetSupervisorReports: "server-stream",
      },
    ],
    [
      "metropolis.proto.api.NodeManagement",
      api.NodeManagementService,
      { Logs: "server-stream", Reboot: "unary", PowerOff: "unary", DefragmentMember: "unary" },
    ],
    [
      "metropolis.proto.curator.Curator",
      curator.CuratorService,
      {
        Watch: "server-stream",
        UpdateNodeStatus: "unary",
        Heartbeat: "bidi",
        RegisterNode: "unary",
        CommitNode: "unary",
        JoinNode: "unary",
        GetConsensusStatus: "unary",
        WatchRevocations: "server-stream",
      },
    ],
    [
      "metropolis.proto.curator.CuratorLocal",
      curator.CuratorLocalService,
      { GetCurrentLeader: "server-stream", GetCACertificate: "unary" },
    ],
  ];

  it("has the Management path of the example", () => {
    expect(api.ManagementService.getRegisterTicket.path).toBe(
      "/metropolis.proto.api.Management/GetRegisterTicket",
    );
    expect(curator.CuratorLocalService.getCaCertificate.path).toBe(
      "/metropolis.proto.curator.CuratorLocal/GetCACertificate",
    );
  });

  it.each(services)("%s has exactly the expected RPCs", (name, service, rpcs) => {
    const kinds: Record<string, Kind> = {};
    for (const def of Object.values(service)) {
      const prefix = `/${name}/`;
      expect(def.path.startsWith(prefix)).toBe(true);
      kinds[def.path.slice(prefix.length)] = kindOf(def);
    }
    expect(kinds).toEqual(rpcs);
  });
});

type Kind = "unary" | "client-stream" | "server-stream" | "bidi";

interface ServiceMethod {
  path: string;
  requestStream: boolean;
  responseStream: boolean;
}

function kindOf(def: ServiceMethod): Kind {
  if (def.requestStream) return def.responseStream ? "bidi" : "client-stream";
  return def.responseStream ? "server-stream" : "unary";
}
