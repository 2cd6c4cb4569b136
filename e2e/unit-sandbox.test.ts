/**
 * The restart policy of `metropolis-node install-service`'s unit, as the
 * guide test's emulated service manager (unit-sandbox.ts) reads it after
 * systemd.service(5): without root or a testbed. The node's exit statuses
 * (node-main.ts, `rebootExitStatus`): 0 for a stop or the owner's power-off,
 * 75 for the owner's reboot, 1 for a failure, 2 for bad flags.
 */
import { rebootExitStatus, renderServiceUnit } from "@metropolis/node";
import { restartsAfter, serviceDirectives, type ServiceExit } from "./unit-sandbox";

const unit = serviceDirectives(
  renderServiceUnit({
    command: ["/usr/bin/node", "/opt/metropolis/packages/node/bin/metropolis-node.js"],
    root: "/var/lib/metropolis",
    address: "10.0.0.1",
    name: "metropolis-node",
  }),
);

const exit = (code: number | null, signal: NodeJS.Signals | null = null): ServiceExit => ({
  code,
  signal,
});

it.each<[string, boolean, ServiceExit]>([
  ["the owner's reboot (exit 75)", true, exit(rebootExitStatus)],
  ["a failure (exit 1)", true, exit(1)],
  ["a crash (SIGKILL)", true, exit(null, "SIGKILL")],
  ["a crash (SIGSEGV)", true, exit(null, "SIGSEGV")],
  ["a stop or the owner's power-off (exit 0)", false, exit(0)],
  ["death by SIGTERM", false, exit(null, "SIGTERM")],
  ["bad flags (exit 2)", false, exit(2)],
])("after %s: started again %p", (_, restarted, how) => {
  expect(restartsAfter(unit, how)).toBe(restarted);
});

it("reads Restart=no and always, and the force list over them", () => {
  const d = (text: string) => serviceDirectives(`[Service]\n${text}\n`);
  expect(restartsAfter(d("Restart=no"), exit(1))).toBe(false);
  expect(restartsAfter(d("Restart=no\nRestartForceExitStatus=75"), exit(75))).toBe(true);
  expect(restartsAfter(d("Restart=always"), exit(0))).toBe(true);
  expect(restartsAfter(d("Restart=always\nRestartPreventExitStatus=0"), exit(0))).toBe(false);
  expect(restartsAfter(d("Restart=on-failure\nSuccessExitStatus=3"), exit(3))).toBe(false);
  expect(() => restartsAfter(d("Restart=on-abnormal"), exit(1))).toThrow(/not emulated/);
});
