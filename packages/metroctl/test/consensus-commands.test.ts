/**
 * `node decommission`, `cluster remove-member`, `cluster move-leader`,
 * `cluster defrag` and `cluster alarms` against a real curator leader (real
 * one-member etcd, real mTLS): what they print, in text and JSON, their
 * refusals (the one voter's quorum, the last consensus member, a member
 * whose node holds the role), `--force` saying what it risks, and bad input
 * refused before anything is sent. The quorum check on three members is in
 * the curator's consensus-maintenance test and e2e/decommission.test.ts.
 */
import { memberClient, raiseAlarm } from "@metropolis/consensus";
import { common } from "@metropolis/proto";
import { metroctl, clusterPerFile, type MetroctlCluster } from "./cluster-fixture";

let cluster: MetroctlCluster;
let config: string;

clusterPerFile((c, dir) => ((cluster = c), (config = dir)));

const risk =
  "is not quorum-checked; if fewer healthy etcd voters than a quorum remain, the cluster stops committing writes (no node changes, no curator failover) until enough of them are back\n";

describe("node decommission", () => {
  it("decommissions a node without an etcd member, and says so again when run again", async () => {
    const node = await cluster.leader.addNode({ roles: { kubernetesWorker: {} } });
    const res = await metroctl(config, ["node", "decommission", node.nodeId]);
    expect(res).toEqual({
      code: 0,
      stderr: "",
      stdout: `node ${node.nodeId} decommissioned: its roles taken away and its certificate revoked (the node stops); \`metroctl delete ${node.nodeId}\` removes its record\n`,
    });
    const record = await cluster.leader.getNode(node.nodeId);
    expect(record?.state).toBe(common.NodeState.DECOMMISSIONED);
    expect(record?.roles).toEqual({});
    const again = await metroctl(config, ["node", "decommission", node.nodeId, "-o", "json"]);
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toEqual({
      nodeId: node.nodeId,
      consensusMemberRemoved: false,
      revokedPeerCertificates: 0,
      alreadyDecommissioned: true,
      wipeRequested: false,
      wipeAcknowledged: false,
    });
    // Decommissioned without a wipe, its certificate is revoked: no wipe can reach it now.
    expect(await metroctl(config, ["node", "decommission", node.nodeId, "--wipe"])).toEqual({
      code: 1,
      stdout: "",
      stderr: `metroctl: node decommission: FAILED_PRECONDITION: node ${node.nodeId} was decommissioned without a wipe: its certificate is revoked, so it can no longer be told to wipe itself; erase its storage on its machine\n`,
    });
    // A decommissioned node is deleted without bypasses: no roles, not UP.
    expect(await metroctl(config, ["delete", node.nodeId])).toMatchObject({ code: 0 });
  });

  it("refuses the last consensus member, forced or not, and nodes that never joined", async () => {
    const first = cluster.leader.firstNode.nodeId;
    const forced = await metroctl(config, ["node", "decommission", first, "--force"]);
    expect(forced.code).toBe(1);
    expect(forced.stderr).toBe(
      `metroctl: node decommission: --force: removing the etcd member of node ${first} ${risk}` +
        `metroctl: node decommission: FAILED_PRECONDITION: node ${first} is the last consensus member; it cannot be decommissioned, forced or not: the cluster's state lives in its etcd\n`,
    );
    const fresh = await cluster.leader.addNode({ state: common.NodeState.NEW });
    expect(await metroctl(config, ["node", "decommission", fresh.nodeId])).toMatchObject({
      code: 1,
      stderr: `metroctl: node decommission: FAILED_PRECONDITION: node ${fresh.nodeId} is NODE_STATE_NEW: only UP nodes are decommissioned; a node that never joined is deleted (metroctl delete)\n`,
    });
    expect(await metroctl(config, ["node", "decommission", "metropolis-x"])).toMatchObject({
      code: 1,
      stderr: `metroctl: node decommission: "metropolis-x" is not a node ID (metropolis- followed by 32 hex digits)\n`,
    });
  });
});

describe("set-role --force", () => {
  it("goes with --consensus off only, says what it risks, and does not pass the last-member check", async () => {
    const first = cluster.leader.firstNode.nodeId;
    expect(await metroctl(config, ["set-role", first, "--worker", "on", "--force"])).toMatchObject({
      code: 1,
      stderr:
        "metroctl: set-role: --force skips the quorum check of --consensus off: give it with that\n",
    });
    const forced = await metroctl(config, [
      "set-role",
      first,
      "--controller",
      "off",
      "--consensus",
      "off",
      "--force",
    ]);
    expect(forced.code).toBe(1);
    expect(forced.stderr).toBe(
      `metroctl: set-role: --force: taking the consensus role from node ${first} ${risk}` +
        `metroctl: set-role: FAILED_PRECONDITION: node ${first} is the last consensus member; its consensus member role cannot be taken away: the cluster's state lives in its etcd\n`,
    );
  });
});

describe("cluster remove-member, move-leader, defrag", () => {
  it("refuses to remove a member whose node holds the role, and a member etcd does not have", async () => {
    const own = (await cluster.leader.member.status.raftStatus()).memberId;
    const first = cluster.leader.firstNode.nodeId;
    const res = await metroctl(config, ["cluster", "remove-member", own.toUpperCase()]);
    expect(res.code).toBe(1);
    expect(res.stderr).toBe(
      `metroctl: cluster remove-member: FAILED_PRECONDITION: member ${own} belongs to node ${first}, which holds the consensus role: take the role away (metroctl set-role ${first} --consensus off) or decommission the node (metroctl node decommission ${first})\n`,
    );
    expect(await metroctl(config, ["cluster", "remove-member", "ffff"])).toMatchObject({
      code: 1,
      stderr: "metroctl: cluster remove-member: NOT_FOUND: etcd has no member ffff\n",
    });
    expect(await metroctl(config, ["cluster", "remove-member", "xyz"])).toMatchObject({
      code: 1,
      stderr:
        'metroctl: cluster remove-member: "xyz" is not an etcd member ID (1 to 16 hex digits, as `metroctl cluster members` prints them)\n',
    });
  });

  it("moves raft leadership to the member that has it already, and says so", async () => {
    const own = (await cluster.leader.member.status.raftStatus()).memberId;
    const first = cluster.leader.firstNode.nodeId;
    expect(await metroctl(config, ["cluster", "move-leader", first])).toEqual({
      code: 0,
      stderr: "",
      stdout: `etcd member ${own} of node ${first} leads raft already\n`,
    });
  });

  it("refuses to defragment the only voter unless forced, and then says what it did", async () => {
    const own = (await cluster.leader.member.status.raftStatus()).memberId;
    const first = cluster.leader.firstNode.nodeId;
    const refused = await metroctl(config, ["cluster", "defrag"]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(
      /^metroctl: cluster defrag: FAILED_PRECONDITION: defragmenting node .* is refused: afterwards 0 healthy voters would remain, fewer than the quorum of 1 \(of 1 voter\)/,
    );
    const forced = await metroctl(config, ["cluster", "defrag", "--force", "-o", "json"]);
    expect(forced.code).toBe(0);
    expect(forced.stderr).toBe(
      `metroctl: cluster defrag: --force: the curator leader's etcd member stalling ${risk}`,
    );
    const view = JSON.parse(forced.stdout);
    expect(view).toMatchObject({ nodeId: first, memberId: own });
    expect(view.dbSizeAfter).toBeGreaterThan(0);
  });
});

describe("cluster alarms", () => {
  it("lists none, then a raised one with its node, and disarms it", async () => {
    const own = (await cluster.leader.member.status.raftStatus()).memberId;
    const first = cluster.leader.firstNode.nodeId;
    expect(await metroctl(config, ["cluster", "alarms"])).toEqual({
      code: 0,
      stderr: "",
      stdout: "no alarms\n",
    });
    const raw = memberClient(cluster.leader.member.status.clientSocket);
    try {
      await raiseAlarm(raw, own, "NOSPACE");
      const listed = await metroctl(config, ["cluster", "alarms", "list"]);
      expect(listed.stdout.split("\n")[1].split(/\s+/)).toEqual([own, first, "NOSPACE"]);
      expect(
        JSON.parse((await metroctl(config, ["cluster", "alarms", "-o", "json"])).stdout),
      ).toEqual([{ memberId: own, nodeId: first, alarm: "NOSPACE" }]);
      expect(
        await metroctl(config, ["cluster", "alarms", "disarm", own, "--alarm", "corrupt"]),
      ).toMatchObject({ code: 0, stdout: `no alarm of etcd member ${own} to disarm\n` });
    } finally {
      const disarmed = await metroctl(config, ["cluster", "alarms", "disarm", own]);
      expect(disarmed).toEqual({
        code: 0,
        stderr: "",
        stdout: `disarmed: NOSPACE of etcd member ${own}\n`,
      });
      raw.close();
    }
    expect((await metroctl(config, ["cluster", "alarms"])).stdout).toBe("no alarms\n");
    expect(await metroctl(config, ["cluster", "alarms", "disarm"])).toMatchObject({
      code: 1,
      stderr: "metroctl: cluster alarms: disarm needs a MEMBER_ID\n",
    });
    expect(
      await metroctl(config, ["cluster", "alarms", "disarm", own, "--alarm", "fire"]),
    ).toMatchObject({
      code: 1,
      stderr: 'metroctl: cluster alarms: --alarm: "fire" is not one of nospace, corrupt\n',
    });
  });

  it("are listed in the help", async () => {
    const help = await metroctl(config, ["cluster", "--help"]);
    for (const command of ["remove-member", "move-leader", "defrag", "alarms"]) {
      expect(help.stdout).toContain(command);
    }
    const node = await metroctl(config, ["node", "--help"]);
    expect(node.stdout).toMatch(/decommission \[options\] <id>\s+take an UP node out of service/);
  });
});
