/**
 * Every error class a package exports extends that package's one base class
 * (SupervisorError, EventError, …), and an instance's `name` is its class's
 * name, set once by the base. The classes are collected from the packages'
 * public entry points, not listed by hand, so a new or changed class is
 * checked without touching this test.
 */
import * as cluster from "@metropolis/cluster";
import * as consensus from "@metropolis/consensus";
import * as consensusTesting from "@metropolis/consensus/testing";
import * as curator from "@metropolis/curator";
import * as curatorTesting from "@metropolis/curator/testing";
import * as event from "@metropolis/event";
import * as localstorage from "@metropolis/localstorage";
import * as metroctl from "@metropolis/metroctl";
import * as node from "@metropolis/node";
import * as pki from "@metropolis/pki";
import * as pkiTesting from "@metropolis/pki/testing";
import * as roleserve from "@metropolis/roleserve";
import * as supervisor from "@metropolis/supervisor";
import * as supervisorGrpc from "@metropolis/supervisor/grpc";
import * as supervisorProcess from "@metropolis/supervisor/process";
import * as supervisorTesting from "@metropolis/supervisor/testing";
import * as localCluster from "../src/index";

type ErrorClass = abstract new (...args: never[]) => Error;

interface Package {
  name: string;
  base: ErrorClass;
  entryPoints: object[];
}

// In the README's order, each above the ones that may import it: a class
// re-exported by a later package belongs to the first one that exports it.
const packages: Package[] = [
  {
    name: "supervisor",
    base: supervisor.SupervisorError,
    entryPoints: [supervisor, supervisorGrpc, supervisorProcess, supervisorTesting],
  },
  { name: "event", base: event.EventError, entryPoints: [event] },
  { name: "localstorage", base: localstorage.LocalStorageError, entryPoints: [localstorage] },
  { name: "pki", base: pki.PkiError, entryPoints: [pki, pkiTesting] },
  {
    name: "consensus",
    base: consensus.ConsensusError,
    entryPoints: [consensus, consensusTesting],
  },
  { name: "curator", base: curator.CuratorError, entryPoints: [curator, curatorTesting] },
  { name: "roleserve", base: roleserve.RoleserveError, entryPoints: [roleserve] },
  { name: "cluster", base: cluster.ClusterError, entryPoints: [cluster] },
  { name: "node", base: node.NodeError, entryPoints: [node] },
  { name: "metroctl", base: metroctl.MetroctlError, entryPoints: [metroctl] },
  { name: "local-cluster", base: localCluster.LocalClusterError, entryPoints: [localCluster] },
];

/**
 * Classes that deliberately do not extend their package's base, and why
 * (the comment above them in their source says more).
 */
const outsideTheBase = new Map<unknown, string>([
  [curator.NoLeaderError, "a client-side error: CuratorError's gRPC code would change retries"],
  [
    curator.LeaderSearchTimeoutError,
    "a NoLeaderError (a client-side error: CuratorError's gRPC code would change retries)",
  ],
  [
    curator.CuratorCertificateNotVerifiedError,
    "a NoLeaderError (a client-side error: CuratorError's gRPC code would change retries)",
  ],
  [
    curator.UnusableLeaderAnswerError,
    "a client-side error: CuratorError's gRPC code would change retries",
  ],
  [
    curator.UnansweredLeaderQuestionError,
    "a client-side error: CuratorError's gRPC code would change retries",
  ],
  [
    curator.CuratorConnectionClosedError,
    "a client-side error: the caller closed the connection; a gRPC code would make it look retried",
  ],
]);

/**
 * Arguments for the classes whose constructor needs more than strings (for
 * the rest, strings are passed). A class that cannot be built from strings
 * and is missing here fails the test, so none goes unchecked.
 */
const constructorArgs = new Map<unknown, unknown[]>([
  [curator.CuratorError, [13, "message"]],
  [curator.NoLeaderError, [[{ host: "127.0.0.1", port: 7835 }], new Error("cause")]],
  [curator.LeaderSearchTimeoutError, [[{ host: "127.0.0.1", port: 7835 }], 1500]],
  [
    curator.CuratorCertificateNotVerifiedError,
    [
      [{ host: "127.0.0.1", port: 7835 }],
      new Error("self-signed certificate in certificate chain"),
    ],
  ],
  [curator.UnusableLeaderAnswerError, [{ host: "127.0.0.1", port: 7835 }, "why"]],
  [curator.UnansweredLeaderQuestionError, [{ host: "127.0.0.1", port: 7835 }, 1500]],
  [pki.CertificateRevokedError, [1n, new Date(0)]],
  [pki.ConcurrentIssuanceError, ["name", ["/key"]]],
  [supervisorTesting.UnexpectedDeathError, [[]]],
  [localCluster.MetroctlFailedError, [["nodes"], 1, "stderr"]],
  [localstorage.WipeIncompleteError, [["data/node"], ["data/node: EBUSY"]]],
]);

function isErrorClass(value: unknown): value is ErrorClass {
  return (
    typeof value === "function" &&
    typeof value.prototype === "object" &&
    value.prototype !== null &&
    Object.prototype.isPrototypeOf.call(Error.prototype, value.prototype)
  );
}

interface Found {
  pkg: Package;
  exportName: string;
  cls: ErrorClass;
}

function exportedErrorClasses(): Found[] {
  const seen = new Set<unknown>();
  const found: Found[] = [];
  for (const pkg of packages) {
    for (const entryPoint of pkg.entryPoints) {
      for (const [exportName, value] of Object.entries(entryPoint)) {
        if (!isErrorClass(value) || seen.has(value)) continue;
        seen.add(value);
        found.push({ pkg, exportName, cls: value });
      }
    }
  }
  return found;
}

function construct(cls: ErrorClass): Error {
  const make = (args: unknown[]) =>
    Reflect.construct(cls as unknown as new (...a: unknown[]) => Error, args);
  const args = constructorArgs.get(cls);
  if (args !== undefined) return make(args);
  return make(Array.from({ length: Math.max(cls.length, 1) }, (_, i) => `arg${i}`));
}

const found = exportedErrorClasses();

describe("error classes", () => {
  it("are found in every package", () => {
    for (const pkg of packages) {
      expect(found.filter((f) => f.pkg === pkg).length).toBeGreaterThan(0);
    }
    expect(found.length).toBeGreaterThan(50);
  });

  it("each package's base class extends Error directly", () => {
    for (const { base } of packages) {
      expect(Object.getPrototypeOf(base)).toBe(Error);
    }
  });

  it.each(found.map((f) => [`${f.pkg.name}: ${f.exportName}`, f] as const))(
    "%s extends its package's base",
    (_, { pkg, cls }) => {
      if (outsideTheBase.has(cls)) {
        expect(cls.prototype).not.toBeInstanceOf(pkg.base);
      } else {
        expect(cls === pkg.base || cls.prototype instanceof pkg.base).toBe(true);
      }
    },
  );

  it.each(found.map((f) => [`${f.pkg.name}: ${f.exportName}`, f] as const))(
    "%s has its class's name",
    (_, { exportName, cls }) => {
      const e = construct(cls);
      expect(e).toBeInstanceOf(cls);
      expect(e.name).toBe(cls.name);
      expect(e.name).toBe(exportName);
      expect(e.stack).toContain(`${exportName}: `);
    },
  );

  it("passes the cause on to Error", () => {
    const cause = new Error("underneath");
    for (const { base } of packages) {
      const args =
        base === curator.CuratorError ? [13, "message", { cause }] : ["message", { cause }];
      const e = Reflect.construct(base as unknown as new (...a: unknown[]) => Error, args);
      expect(e.cause).toBe(cause);
    }
  });
});
