// Crash safety of writes, tested with a real crash: a child process performs
// the write, stops between writing the temporary file and renaming it (see
// fixtures/paused-writer.ts), and is SIGKILLed there by PID. What survives on
// disk is then read back through the tree API.
import { ChildProcess, spawn } from "node:child_process";
import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { isTemporaryName } from "../src/atomic-write";
import { dir, file, place } from "../src";
import { FileMissingError } from "../src/errors";

const fixtures = path.join(__dirname, "fixtures");
const deadlineMs = 20_000;

let root: string;
let child: ChildProcess | undefined;
let childClosed: Promise<NodeJS.Signals | null> | undefined;

beforeEach(async () => {
  root = await fs.mkdtemp(path.join(os.tmpdir(), "localstorage-crash-"));
});

afterEach(async () => {
  // A failed assertion must not leave the child running or its pipes open.
  if (child !== undefined && child.exitCode === null && child.signalCode === null) {
    child.kill("SIGKILL");
  }
  await childClosed;
  child = undefined;
  childClosed = undefined;
  await fs.rm(root, { recursive: true, force: true });
});

function withDeadline<T>(promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), deadlineMs);
  });
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer));
}

/** Starts the paused writer and resolves with its temporary file once it has paused. */
function startPausedWriter(
  target: string,
  content: string,
  how: "replace" | "exclusive",
): Promise<string> {
  const started = spawn(
    process.execPath,
    [
      "--require",
      path.join(fixtures, "register-swc.js"),
      path.join(fixtures, "paused-writer.ts"),
    ].concat([target, content, how]),
    { stdio: ["pipe", "pipe", "pipe"] },
  );
  child = started;
  childClosed = new Promise((resolve) => started.once("close", (_code, signal) => resolve(signal)));
  let stdout = "";
  let stderr = "";
  started.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const paused = new Promise<string>((resolve, reject) => {
    started.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
      const line = stdout.split("\n")[0];
      if (stdout.includes("\n") && line !== undefined) {
        resolve((JSON.parse(line) as { temporaryPath: string }).temporaryPath);
      }
    });
    started.once("close", (code) =>
      reject(new Error(`writer exited (${code}) before pausing:\n${stderr}`)),
    );
  });
  return withDeadline(paused, "the writer to pause before its rename");
}

async function killWriter(): Promise<void> {
  const pid = child?.pid;
  expect(pid).toBeDefined();
  process.kill(pid!, "SIGKILL");
  expect(await withDeadline(childClosed!, "the killed writer to exit")).toBe("SIGKILL");
}

function declareTree() {
  return place(dir({ state: dir({ roles: file("roles.pb") }) }), root);
}

test("a writer killed before its rename leaves the old content, and a later write succeeds", async () => {
  const tree = declareTree();
  await tree.mkdirAll();
  await tree.state.roles.write(Buffer.from("old"));

  const temporary = await startPausedWriter(tree.state.roles.fullPath, "new", "replace");
  // The kill really lands between the two steps: new content written, not yet renamed.
  expect(path.dirname(temporary)).toBe(tree.state.fullPath);
  expect(await fs.readFile(temporary, "utf8")).toBe("new");
  expect(await fs.readFile(tree.state.roles.fullPath, "utf8")).toBe("old");

  await killWriter();

  expect((await tree.state.roles.read()).toString()).toBe("old");
  // The stale temporary file is still there, recognisably not data...
  const leftovers = (await fs.readdir(tree.state.fullPath)).filter((name) => name !== "roles.pb");
  expect(leftovers).toEqual([path.basename(temporary)]);
  expect(isTemporaryName(leftovers[0])).toBe(true);
  // ...it does not get in the way of the next write...
  await tree.state.roles.write(Buffer.from("newer"));
  expect((await tree.state.roles.read()).toString()).toBe("newer");
  // ...and the start-of-boot cleanup removes it, and only it.
  expect(await tree.removeStaleTemporaries()).toEqual([temporary]);
  expect(await fs.readdir(tree.state.fullPath)).toEqual(["roles.pb"]);
});

test("a writer killed during a file's first write leaves no file", async () => {
  const tree = declareTree();
  await tree.mkdirAll();

  await startPausedWriter(tree.state.roles.fullPath, "first", "replace");
  await killWriter();

  expect(await tree.state.roles.exists()).toBe(false);
  await expect(tree.state.roles.read()).rejects.toThrow(FileMissingError);
  await tree.state.roles.write(Buffer.from("second"));
  expect((await tree.state.roles.read()).toString()).toBe("second");
});

test("a writer killed before an exclusive commit leaves nothing to block the next one", async () => {
  const tree = declareTree();
  await tree.mkdirAll();

  await startPausedWriter(tree.state.roles.fullPath, "first", "exclusive");
  await killWriter();

  expect(await tree.state.roles.exists()).toBe(false);
  await tree.state.roles.write(Buffer.from("second"), { exclusive: true });
  expect((await tree.state.roles.read()).toString()).toBe("second");
});
