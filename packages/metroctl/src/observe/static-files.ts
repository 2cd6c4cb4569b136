/**
 * The page itself: the files Vite built into observer-ui/dist, read once at
 * start-up and served from memory. Only those files exist for the server
 * (no path from a request ever reaches the file system), each with its
 * content type; `/` is index.html.
 */
import { readdir, readFile } from "node:fs/promises";
import { extname, join, relative, sep } from "node:path";
import { MetroctlError } from "../errors";
import { packageRoot } from "../package-root";

/**
 * Where the built page is: observer-ui/dist of metroctl's package, from tsc's
 * output and from the bundle alike (see package-root.ts).
 */
export const defaultUiDir = join(packageRoot(), "observer-ui", "dist");

/** The page was not built. */
export class ObserverUiMissingError extends MetroctlError {
  constructor(dir: string) {
    super(
      `the observer's page is not built (no ${join(dir, "index.html")}): run \`npm run build:observer-ui\``,
    );
  }
}

const contentTypes: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
};

/** One file of the page. */
export interface StaticFile {
  body: Buffer;
  contentType: string;
}

async function listFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries.filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name));
}

/**
 * The page's files by URL path (`/index.html`, `/assets/index-….js`), and
 * `/` for index.html.
 * @throws ObserverUiMissingError when there is no built page in `dir`
 */
export async function loadStaticFiles(dir: string): Promise<Map<string, StaticFile>> {
  const files = new Map<string, StaticFile>();
  let paths: string[];
  try {
    paths = await listFiles(dir);
  } catch {
    throw new ObserverUiMissingError(dir);
  }
  for (const path of paths) {
    const contentType = contentTypes[extname(path)];
    if (contentType === undefined) continue;
    const url = "/" + relative(dir, path).split(sep).join("/");
    files.set(url, { body: await readFile(path), contentType });
  }
  const index = files.get("/index.html");
  if (!index) throw new ObserverUiMissingError(dir);
  files.set("/", index);
  return files;
}
