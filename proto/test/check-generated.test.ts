import { execFile } from "node:child_process";
import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";

// scripts/check-generated.sh, run on a copy of this package (next to a link
// to the repository's node_modules, as the script expects), so that the copy
// can be made stale without touching the real one.

const packageDir = path.resolve(__dirname, "..");
const nodeModules = path.resolve(packageDir, "..", "node_modules");
const commonProto = "schema/metropolis/proto/common/common.proto";

interface Result {
  code: number;
  output: string;
}

function check(copy: string): Promise<Result> {
  const script = path.join(copy, "scripts", "check-generated.sh");
  return new Promise((resolve) => {
    execFile("bash", [script], (err, stdout, stderr) => {
      const code = err ? (typeof err.code === "number" ? err.code : -1) : 0;
      resolve({ code, output: stdout + stderr });
    });
  });
}

let root: string;
let copy: string;

beforeEach(async () => {
  root = await fs.mkdtemp(path.join(os.tmpdir(), "metropolis-proto-check-"));
  await fs.symlink(nodeModules, path.join(root, "node_modules"), "dir");
  copy = path.join(root, "proto");
  for (const entry of ["buf.yaml", "buf.gen.yaml", "schema", "scripts", "src/gen"]) {
    await fs.cp(path.join(packageDir, entry), path.join(copy, entry), { recursive: true });
  }
});

afterEach(async () => {
  await fs.rm(root, { recursive: true, force: true });
});

async function edit(file: string, from: string, to: string): Promise<void> {
  const p = path.join(copy, file);
  const text = await fs.readFile(p, "utf8");
  expect(text).toContain(from);
  await fs.writeFile(p, text.replace(from, to));
}

describe("check-generated.sh", () => {
  it("passes when the generated code matches the .proto files", async () => {
    const { code, output } = await check(copy);
    expect(output).toContain("up to date");
    expect(code).toBe(0);
  });

  it("fails when a .proto changed without regenerating", async () => {
    await edit(
      commonProto,
      "  string boot_id = 4;\n",
      "  string boot_id = 4;\n  // A field added without regenerating (a number no field of NodeStatus uses).\n  string zone = 99;\n",
    );
    const { code, output } = await check(copy);
    expect(code).toBe(1);
    expect(output).toContain("generated code is stale: run npm run proto:generate");
    expect(output).toContain("zone");
  });

  it("fails when generated code was edited by hand", async () => {
    await edit(
      "src/gen/metropolis/proto/common/common.ts",
      "export interface NodeStatus {",
      "export interface NodeStatus {\n  handWritten?: string;",
    );
    const { code, output } = await check(copy);
    expect(code).toBe(1);
    expect(output).toContain("generated code is stale");
  });

  it("fails when the .proto files break the lint rules", async () => {
    await edit(
      commonProto,
      "  string boot_id = 4;\n",
      "  string boot_id = 4;\n  string zone = 6;\n",
    );
    const { code, output } = await check(copy);
    expect(code).toBe(1);
    expect(output).toContain("buf lint failed");
  });
});
