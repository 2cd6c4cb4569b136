/**
 * Whether this machine can run the multi-host testbed, and if not, why, in
 * one line: so that a caller (a test file, `npm start -- --hosts`) can say
 * so and fall back to loopback instead of failing half-way through
 * building namespaces.
 *
 * It checks what is needed and cheap to see without changing anything:
 * Linux, root (namespaces, veths and iptables need CAP_SYS_ADMIN and
 * CAP_NET_ADMIN), the tools on PATH or in the sbin directories, and that
 * the host's firewall does not drop bridged traffic (with
 * `bridge-nf-call-iptables` on, frames crossing a bridge go through the
 * host's FORWARD chain, and a DROP policy there — Docker sets one — cuts
 * every host of the testbed off from the others). The answer is synchronous,
 * so that it can choose between `describe` and `describe.skip`.
 */
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { findTool, testbedTools, type TestbedTool } from "./host-command";

/** Whether a testbed can be built here; when not, `reason` says why in one line. */
export type TestbedAvailability = { ok: true } | { ok: false; reason: string };

/** See the module comment. */
export function testbedAvailability(): TestbedAvailability {
  if (process.platform !== "linux") {
    return { ok: false, reason: `network namespaces need Linux (this is ${process.platform})` };
  }
  if (process.getuid?.() !== 0) {
    return {
      ok: false,
      reason: "network namespaces, veths and iptables need root: run it as root",
    };
  }
  const names = Object.keys(testbedTools).filter((t): t is TestbedTool => t in testbedTools);
  const missing = names.filter((name) => findTool(name) === undefined);
  if (missing.length > 0) {
    const packages = [...new Set(missing.map((name) => testbedTools[name]))];
    return {
      ok: false,
      reason:
        `missing ${missing.join(", ")}: install Debian's ${packages.join(" ")} ` +
        `(apt-get install -y ${packages.join(" ")})`,
    };
  }
  if (bridgedTrafficFiltered() && forwardPolicyDrops()) {
    return {
      ok: false,
      reason:
        "the host's iptables FORWARD policy is DROP and net.bridge.bridge-nf-call-iptables is 1, " +
        "so traffic between the testbed's hosts would be dropped (Docker does this): " +
        "sysctl -w net.bridge.bridge-nf-call-iptables=0, or allow the bridges mtb*br in FORWARD",
    };
  }
  return { ok: true };
}

/** Whether frames crossing a bridge go through the host's iptables. */
function bridgedTrafficFiltered(): boolean {
  try {
    return readFileSync("/proc/sys/net/bridge/bridge-nf-call-iptables", "utf8").trim() === "1";
  } catch {
    return false; // br_netfilter is not loaded
  }
}

/** Whether the host's FORWARD chain drops what no rule accepts (and no rule accepts our bridges). */
function forwardPolicyDrops(): boolean {
  const iptables = findTool("iptables");
  if (iptables === undefined) return false;
  const result = spawnSync(iptables, ["-S", "FORWARD"], { encoding: "utf8", timeout: 10_000 });
  if (result.status !== 0) return false;
  const lines = result.stdout.split("\n");
  const drops = lines.some((l) => /^-P FORWARD (DROP|REJECT)/.test(l));
  const allowsOurs = lines.some((l) => /-i mtb\S*br|-o mtb\S*br|physdev/.test(l));
  return drops && !allowsOurs;
}
