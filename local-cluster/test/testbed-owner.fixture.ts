/**
 * A testbed's owner for testbed.test.ts, run as a process of its own (node
 * -r ./swc-register.js): it builds a 2-host testbed, starts a process on
 * host 1, prints `{"tag", "pid"}` once that process is in host 1's
 * namespace, and waits to be killed — the test then SIGKILLs it, as a
 * crashed test process would die.
 */
import { Testbed } from "../src/testbed";

void (async () => {
  const testbed = await Testbed.create({ hosts: 2 });
  const child = testbed.spawn(1, process.execPath, ["-e", "setInterval(() => {}, 1000)"], {
    stdio: "ignore",
  });
  const pid = child.pid;
  if (pid === undefined) throw new Error("the process on host 1 did not start");
  while (!(await testbed.processes(1)).includes(pid)) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  process.stdout.write(JSON.stringify({ tag: testbed.tag, pid }) + "\n");
  setInterval(() => undefined, 1000);
})();
