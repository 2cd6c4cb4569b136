/**
 * CuratorConnection stops as soon as its caller gives up: an aborted call
 * does not keep looking for a leader until its own deadline.
 */
import { freePort } from "@metropolis/consensus/testing";
import { CertificateAuthority } from "@metropolis/pki";
import { CuratorConnection } from "../src/curator-client";

describe("CuratorConnection", () => {
  it("ends a call with the abort reason while no curator answers", async () => {
    const ca = await CertificateAuthority.create();
    // A port nothing listens on: the connection can only keep looking.
    const port = await freePort("127.0.0.1");
    const connection = new CuratorConnection({
      endpoints: [{ host: "127.0.0.1", port }],
      ca: ca.certificate.toPem(),
    });
    const controller = new AbortController();
    const reason = new Error("caller gave up");
    const call = connection.call(async () => "unreachable", {
      timeoutMs: 600_000,
      signal: controller.signal,
    });
    controller.abort(reason);
    await expect(call).rejects.toBe(reason);
    connection.close();
  });
});
