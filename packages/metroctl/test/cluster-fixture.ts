/**
 * A cluster for metroctl's tests: the curator's leader fixture (real
 * one-member etcd, bootstrapped cluster, real mTLS on loopback) serving
 * Management, AAA and CuratorLocal — everything metroctl dials — plus
 * helpers to run metroctl in-process against it with a temp config dir
 * and HOME.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import winston from "winston";
import { MemoryValue } from "@metropolis/event";
import {
  aaaServer,
  curatorLocalServer,
  managementServer,
  managementService,
} from "@metropolis/curator";
import { tlsMaterial } from "@metropolis/pki";
import { api, curator as curatorProto } from "@metropolis/proto";
import { ConfigDir, runMetroctl, type OutputStream } from "../src";
import { startLeader, type LeaderFixture } from "@metropolis/curator/testing";

/** Collects what metroctl writes. */
export class Capture implements OutputStream {
  text = "";
  isTTY?: boolean;

  write(chunk: string): boolean {
    this.text += chunk;
    return true;
  }
}

/** A capture that claims to be a terminal, with the cursor methods ora calls. */
export class TerminalCapture extends Capture {
  override isTTY = true;
  columns = 120;
  clearLine(): boolean {
    return true;
  }
  cursorTo(): boolean {
    return true;
  }
  moveCursor(): boolean {
    return true;
  }
}

/** The outcome of one metroctl run. */
export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** A temp directory, removed by `removeTempDirs()`. */
const tempDirs: string[] = [];
export async function tempDir(name: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), `metroctl-${name}-`));
  tempDirs.push(dir);
  return dir;
}
export async function removeTempDirs(): Promise<void> {
  for (const dir of tempDirs.splice(0)) await rm(dir, { recursive: true, force: true });
}

/**
 * Runs metroctl in-process with `--config <config>` and HOME set to a temp
 * dir of its own (so nothing can touch the real ~/.config).
 */
export async function metroctl(
  config: string,
  args: readonly string[],
  opts: { signal?: AbortSignal; stdout?: Capture; stderr?: Capture } = {},
): Promise<RunResult> {
  const stdout = opts.stdout ?? new Capture();
  const stderr = opts.stderr ?? new Capture();
  const code = await runMetroctl(["--config", config, ...args], {
    stdout,
    stderr,
    env: { HOME: config },
    signal: opts.signal,
  });
  return { code, stdout: stdout.text, stderr: stderr.text };
}

export interface MetroctlCluster {
  leader: LeaderFixture;
  /** How many times a client asked the leader's CuratorLocal who leads. */
  readonly leaderQuestions: number;
  /** The leader's address, for --endpoints. */
  endpoint: string;
  /**
   * A new config dir holding what takeownership would store (the fixture's
   * owner key, certificate, CA) and the leader's endpoint.
   */
  ownerConfig(): Promise<string>;
  /** Stops the leader and removes temp dirs. */
  stop(): Promise<void>;
}

/**
 * Starts a leader serving Management, AAA and CuratorLocal. `management`
 * may replace methods of the leader's Management service (a stream that
 * never answers, say).
 */
export async function startCluster(
  opts: { management?: (real: api.ManagementServer) => api.ManagementServer } = {},
): Promise<MetroctlCluster> {
  const stopLocal = new AbortController();
  // CuratorLocal needs the CA's PEM, which exists only once the fixture bootstrapped; calls
  // arrive only after startLeader returns, so the implementation is filled in then.
  const local: { server?: curatorProto.CuratorLocalServer } = {};
  let leaderQuestions = 0;
  const lazyLocal: curatorProto.CuratorLocalServer = {
    getCurrentLeader: (call) => {
      leaderQuestions++;
      return local.server!.getCurrentLeader(call);
    },
    getCaCertificate: (call, callback) => local.server!.getCaCertificate(call, callback),
  };
  const leader = await startLeader({
    services: (ctx) => [
      [managementService, (opts.management ?? ((real) => real))(managementServer(ctx))],
      [api.AAAService, aaaServer(ctx)],
      [curatorProto.CuratorLocalService, lazyLocal],
    ],
  });
  local.server = curatorLocalServer({
    nodeId: leader.ctx.self.nodeId,
    leader: new MemoryValue(leader.ctx.self),
    caCertificate: leader.caPem,
    logger: winston.createLogger({ silent: true }),
    signal: stopLocal.signal,
  });
  return {
    leader,
    get leaderQuestions() {
      return leaderQuestions;
    },
    endpoint: leader.address,
    ownerConfig: async () => {
      const dir = await tempDir("config");
      const config = new ConfigDir(dir);
      await config.writeOwnerKey(leader.owner.privateKey);
      await config.writeOwnerCertificate(leader.owner.certificate, leader.caCertificate);
      await config.writeEndpoints([
        { host: "127.0.0.1", port: Number(leader.address.split(":")[1]) },
      ]);
      return dir;
    },
    stop: async () => {
      stopLocal.abort();
      await leader.stop();
      await removeTempDirs();
    },
  };
}

/**
 * The setup of a test file that runs metroctl as the owner: a cluster
 * started in `beforeAll` (handed to `ready` with an owner config dir, see
 * `ownerConfig`) and stopped in `afterAll`.
 *
 *   let cluster: MetroctlCluster;
 *   let config: string;
 *   clusterPerFile((c, dir) => ((cluster = c), (config = dir)));
 */
export function clusterPerFile(ready: (cluster: MetroctlCluster, config: string) => void): void {
  let cluster: MetroctlCluster | undefined;
  beforeAll(async () => {
    cluster = await startCluster();
    ready(cluster, await cluster.ownerConfig());
  }, 30_000);
  afterAll(async () => {
    await cluster?.stop();
  });
}

/** PEM client material of the fixture's owner, for checks outside metroctl. */
export function ownerTls(leader: LeaderFixture) {
  return tlsMaterial({
    certificate: leader.owner.certificate,
    privateKey: leader.owner.privateKey,
    ca: leader.caCertificate,
  });
}
