/**
 * identify() of a call whose client has already gone: grpc-js's
 * getAuthContext() reads the certificate of the call's TLS socket, which is
 * null once the client closed it, and throws. The scale simulator's nodes hit
 * that under load (every such call answered INTERNAL, logged as a curator
 * bug); the caller is anonymous now, refused like any caller without a
 * certificate.
 */
import { CertificateAuthority } from "@metropolis/pki";
import { identify, type HasAuthContext } from "../src/identity";

it("takes a call whose TLS socket is gone for an anonymous caller", async () => {
  const ca = await CertificateAuthority.create();
  const gone: HasAuthContext = {
    getAuthContext: () => {
      // What grpc-js throws: `getPeerCertificate()` returned null.
      throw new TypeError("Cannot read properties of null (reading 'raw')");
    },
  };
  await expect(identify(gone, ca.certificate)).resolves.toEqual({ kind: "anonymous" });
});
