/**
 * etcd's maintenance operations on one member, as an operator runs them with
 * etcdctl: hand raft leadership to another voter (MoveLeader), defragment
 * the member's database, and list or disarm the cluster's alarms.
 *
 * Each works through the client of one member (every member's client
 * endpoint is a unix socket of its node, so a curator reaches only its own):
 * MoveLeader only succeeds when that member leads raft, defragmentation
 * rewrites that member's database only, and alarms are the cluster's (etcd
 * keeps them in raft), so any member lists and disarms all of them. Member
 * IDs are hex, as etcdctl and {@link hexMemberId} print them.
 */
import { AlarmAction, AlarmType, type Etcd3 } from "etcd3";
import { MemberMaintenanceError, NotRaftLeaderError } from "./errors";
import { hexMemberId } from "./raft-status";

/** The alarms etcd raises. */
export type EtcdAlarm = "NOSPACE" | "CORRUPT";

/** One alarm raised on one member. */
export interface MemberAlarm {
  /** The member, hex. */
  memberId: string;
  alarm: EtcdAlarm;
}

/** What {@link defragmentMember} did. */
export interface Defragmented {
  /** The member defragmented, hex. */
  memberId: string;
  /** Its database's size on disk before and after, in bytes. */
  dbSizeBefore: number;
  dbSizeAfter: number;
}

/** How long a maintenance call may take by default (defragmenting a large database takes a while). */
export const maintenanceCallTimeoutMs = 60_000;

/** A hex member ID as etcd's API takes it: decimal. Throws MemberMaintenanceError on anything but hex. */
export function decimalMemberId(hex: string): string {
  if (!/^[0-9a-f]{1,16}$/.test(hex)) {
    // Never echoed whole: a 20,000-character one made a status too large
    // for gRPC's trailers, and the caller waited out its deadline (fuzz test).
    const shown = hex.length <= 32 ? JSON.stringify(hex) : `a ${hex.length}-character string`;
    throw new MemberMaintenanceError(
      `${shown} is not an etcd member ID (1 to 16 lower-case hex digits)`,
    );
  }
  return BigInt(`0x${hex}`).toString(10);
}

/** The member's status, within `timeoutMs`. */
async function memberStatus(client: Etcd3, timeoutMs: number) {
  try {
    return await client.maintenance.status({ deadline: Date.now() + timeoutMs });
  } catch (e) {
    throw new MemberMaintenanceError(
      `the etcd member did not answer its status within ${timeoutMs} ms: ${String(e)}`,
      { cause: e },
    );
  }
}

/**
 * Hands raft leadership from the member of `client`, which must lead raft
 * (NotRaftLeaderError otherwise), to the voter `targetHex`. Resolves with the
 * leader's ID (hex) once etcd answered: its MoveLeader returns after the
 * target took over.
 */
export async function moveRaftLeader(
  client: Etcd3,
  targetHex: string,
  timeoutMs = maintenanceCallTimeoutMs,
): Promise<string> {
  const targetID = decimalMemberId(targetHex);
  const status = await memberStatus(client, timeoutMs);
  const self = hexMemberId(status.header.member_id);
  const leader = status.leader === "0" ? undefined : hexMemberId(status.leader);
  if (leader !== self) throw new NotRaftLeaderError(self, leader);
  if (targetHex === self) return self;
  try {
    await client.maintenance.moveLeader({ targetID }, { deadline: Date.now() + timeoutMs });
  } catch (e) {
    throw new MemberMaintenanceError(
      `etcd did not hand raft leadership from ${self} to ${targetHex}: ${String(e)}`,
      { cause: e },
    );
  }
  return self;
}

/** Defragments the database of the member of `client`; see {@link Defragmented}. */
export async function defragmentMember(
  client: Etcd3,
  timeoutMs = maintenanceCallTimeoutMs,
): Promise<Defragmented> {
  const before = await memberStatus(client, timeoutMs);
  try {
    await client.maintenance.defragment({ deadline: Date.now() + timeoutMs });
  } catch (e) {
    throw new MemberMaintenanceError(`etcd did not defragment its database: ${String(e)}`, {
      cause: e,
    });
  }
  const after = await memberStatus(client, timeoutMs);
  return {
    memberId: hexMemberId(before.header.member_id),
    dbSizeBefore: Number(before.dbSize),
    dbSizeAfter: Number(after.dbSize),
  };
}

/** An alarm as etcd3 decodes it (its enum's name, or its number). */
function alarmOf(raw: string | number): EtcdAlarm | undefined {
  if (raw === "Nospace" || raw === AlarmType.Nospace) return "NOSPACE";
  if (raw === "Corrupt" || raw === AlarmType.Corrupt) return "CORRUPT";
  return undefined;
}

/** The alarm types of etcd's API. */
const alarmTypes: Record<EtcdAlarm, AlarmType> = {
  NOSPACE: AlarmType.Nospace,
  CORRUPT: AlarmType.Corrupt,
};

/** Runs one Alarm request and decodes the alarms it answers. */
async function alarmCall(
  client: Etcd3,
  action: AlarmAction,
  memberHex: string | undefined,
  alarm: EtcdAlarm | undefined,
  timeoutMs: number,
): Promise<MemberAlarm[]> {
  let answer;
  try {
    answer = await client.maintenance.alarm(
      {
        action,
        memberID: memberHex === undefined ? "0" : decimalMemberId(memberHex),
        alarm: alarm === undefined ? AlarmType.None : alarmTypes[alarm],
      },
      { deadline: Date.now() + timeoutMs },
    );
  } catch (e) {
    if (e instanceof MemberMaintenanceError) throw e;
    throw new MemberMaintenanceError(`etcd did not answer its alarms: ${String(e)}`, {
      cause: e,
    });
  }
  const alarms: MemberAlarm[] = [];
  for (const raised of answer.alarms) {
    const kind = alarmOf(raised.alarm);
    if (kind !== undefined) alarms.push({ memberId: hexMemberId(raised.memberID), alarm: kind });
  }
  return alarms;
}

/** Every alarm raised in the cluster of the member of `client`. */
export function listAlarms(
  client: Etcd3,
  timeoutMs = maintenanceCallTimeoutMs,
): Promise<MemberAlarm[]> {
  return alarmCall(client, AlarmAction.Get, undefined, undefined, timeoutMs);
}

/**
 * Disarms the alarm `alarm` of member `memberHex`, or every alarm of that
 * member when `alarm` is undefined; resolves with the alarms that were
 * raised and are disarmed now (none when none was).
 */
export async function disarmAlarm(
  client: Etcd3,
  memberHex: string,
  alarm: EtcdAlarm | undefined,
  timeoutMs = maintenanceCallTimeoutMs,
): Promise<MemberAlarm[]> {
  decimalMemberId(memberHex); // checked before anything is asked
  const raised = (await listAlarms(client, timeoutMs)).filter(
    (a) => a.memberId === memberHex && (alarm === undefined || a.alarm === alarm),
  );
  for (const a of raised) {
    await alarmCall(client, AlarmAction.Deactivate, a.memberId, a.alarm, timeoutMs);
  }
  return raised;
}

/**
 * Raises `alarm` on member `memberHex`, as etcd does by itself when its
 * database reaches its quota: for tests of the alarms' listing and disarming.
 */
export async function raiseAlarm(
  client: Etcd3,
  memberHex: string,
  alarm: EtcdAlarm,
  timeoutMs = maintenanceCallTimeoutMs,
): Promise<void> {
  await alarmCall(client, AlarmAction.Activate, memberHex, alarm, timeoutMs);
}
