/**
 * A `.tar.gz` written atomically, entry by entry: tar-stream packs the
 * entries (in memory, each given whole), zlib gzips them, and they go to a
 * temporary file beside the target (mode 0600, created exclusively), which
 * is fsynced and renamed over the target only once everything was written.
 * A failure, or {@link TarGzipFile.abort}, removes the temporary file: the
 * target is either the old file (or none) or the whole new archive, never
 * half of one.
 *
 * Why tar-stream: it packs entries from buffers (what metroctl has, nothing
 * is on disk) as a stream, is small (a few pure-JS dependencies, no native
 * code, so it bundles with esbuild) and ships its own types; node-tar
 * builds archives from files on disk, which the bundle would first have to
 * write out.
 */
import { randomBytes } from "node:crypto";
import { createWriteStream, type WriteStream } from "node:fs";
import { open, rename, unlink } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { pipeline } from "node:stream/promises";
import { createGzip } from "node:zlib";
import { pack, type Pack } from "tar-stream";
import { MetroctlError } from "./errors";

/** The archive could not be written; the message names the file. */
export class ArchiveWriteError extends MetroctlError {}

/** An archive being written; see the module comment. */
export class TarGzipFile {
  private readonly tar: Pack;
  private readonly written: Promise<void>;
  private closed = false;

  private constructor(
    /** Where the archive goes once finished. */
    readonly path: string,
    private readonly temporary: string,
    out: WriteStream,
    /** The time every entry is stamped with. */
    private readonly mtime: Date,
  ) {
    this.tar = pack();
    this.written = pipeline(this.tar, createGzip(), out);
    // Seen by finish() or abort(); never an unhandled rejection meanwhile.
    this.written.catch(() => undefined);
  }

  /** Starts writing the archive that will be `path`, its entries stamped `mtime`. */
  static async create(path: string, mtime = new Date()): Promise<TarGzipFile> {
    const temporary = join(
      dirname(path),
      `.${basename(path)}.${randomBytes(6).toString("hex")}.tmp`,
    );
    const handle = await open(temporary, "wx", 0o600).catch((e: unknown) => {
      throw new ArchiveWriteError(`${path}: cannot create it: ${errorText(e)}`, { cause: e });
    });
    // The stream owns the handle from here on, and closes it when it ends.
    return new TarGzipFile(path, temporary, createWriteStream("", { fd: handle }), mtime);
  }

  /** Adds a file `name` (a relative path, `/`-separated) holding `data`, mode 0600. */
  add(name: string, data: string | Buffer): Promise<void> {
    if (this.closed) return Promise.reject(new ArchiveWriteError(`${this.path}: already closed`));
    const bytes = typeof data === "string" ? Buffer.from(data, "utf8") : data;
    return new Promise((resolve, reject) => {
      this.tar.entry(
        { name, size: bytes.length, mode: 0o600, mtime: this.mtime, type: "file" },
        bytes,
        (err) =>
          err ? reject(new ArchiveWriteError(`${this.path}: ${errorText(err)}`)) : resolve(),
      );
    });
  }

  /** Ends the archive, makes it durable and puts it in place. */
  async finish(): Promise<void> {
    this.closed = true;
    this.tar.finalize();
    try {
      await this.written;
      const handle = await open(this.temporary, "r+");
      try {
        await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(this.temporary, this.path);
    } catch (e) {
      await unlink(this.temporary).catch(() => undefined);
      throw new ArchiveWriteError(`${this.path}: ${errorText(e)}`, { cause: e });
    }
  }

  /** Gives the archive up: the temporary file is removed, the target left as it was. */
  async abort(): Promise<void> {
    this.closed = true;
    this.tar.destroy();
    await this.written.catch(() => undefined);
    await unlink(this.temporary).catch(() => undefined);
  }
}

function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
