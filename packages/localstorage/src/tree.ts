/**
 * The declarative tree: a node's on-disk state is declared once as nested
 * `dir()` and `file()` calls, placed under a root path once, and from then on
 * reached through typed properties (`root.esp.metropolis.parameters`) instead
 * of path strings scattered through the code. A typo is a compile error, and
 * the layout can be read in one place.
 *
 * Placement lives in module-private maps rather than on the nodes so that the
 * only public members of a directory are its own methods and its children.
 */
import * as fs from "node:fs/promises";
import * as path from "node:path";
import { atomicWriteFile, removeStaleTemporaries } from "./atomic-write";
import {
  FileCorruptedError,
  FileMissingError,
  InvalidTreeError,
  NotPlacedError,
  PlacementError,
} from "./errors";

/**
 * Turns a file's bytes into a value and back. `decode` must throw on bytes it
 * does not accept (truncated, corrupt, failing validation): `read()` turns the
 * throw into a {@link FileCorruptedError} naming the file.
 */
export interface Codec<T> {
  decode(bytes: Buffer): T;
  encode(value: T): Uint8Array;
}

/** The codec of files declared without one: the content is the raw bytes. */
export const rawBytes: Codec<Buffer> = {
  decode: (bytes) => bytes,
  encode: (value) => value,
};

/**
 * How a secret file's bytes are protected at rest. Provided by the directory
 * that owns the key (the data directory); a secret file asks its ancestors for it.
 */
export interface ContentProtection {
  /** Protects the plaintext of `file` for storage. */
  seal(file: File<unknown>, plaintext: Buffer): Buffer;
  /** Recovers the plaintext of `file`; throws {@link FileCorruptedError} if it does not verify. */
  open(file: File<unknown>, stored: Buffer): Buffer;
}

/**
 * Hook by which a directory controls file access below it: it may refuse
 * (data not mounted) and it supplies the {@link ContentProtection} for secret
 * files. A symbol, not a method name, so it cannot clash with a child's
 * property name and stays out of the package's public surface.
 */
export const contentAccess: unique symbol = Symbol("localstorage.contentAccess");

/** Any node of a tree. */
export type TreeNode = Directory | File<unknown>;

/** The children of a directory, by property name. */
export type Children = { readonly [property: string]: TreeNode };

/** Forbids property names that would shadow the members of directory class `D`. */
export type NoShadowing<D> = { readonly [K in keyof D]?: never };

interface Link {
  readonly parent: Directory;
  readonly name: string;
}

const links = new WeakMap<TreeNode, Link>();
const rootPaths = new WeakMap<Directory, string>();
// Set by Directory's static block; see there.
let adoptChildren: (directory: Directory, children: Children) => void;

function validateName(name: string, what: string): void {
  if (name === "") {
    throw new InvalidTreeError(`${what}: name is empty`);
  }
  if (name.includes("/") || name.includes("\0")) {
    throw new InvalidTreeError(`${what}: name ${JSON.stringify(name)} contains a slash or NUL`);
  }
  if (name === "." || name === "..") {
    throw new InvalidTreeError(`${what}: name ${JSON.stringify(name)} is not a real entry`);
  }
}

function relativePathOf(node: TreeNode): string {
  const parts: string[] = [];
  for (let link = links.get(node); link !== undefined; link = links.get(link.parent)) {
    parts.unshift(link.name);
  }
  return parts.join("/");
}

function fullPathOf(node: TreeNode): string {
  let root: Directory | undefined;
  for (let current: TreeNode = node; ;) {
    const link = links.get(current);
    if (link === undefined) {
      root = current instanceof Directory ? current : undefined;
      break;
    }
    current = link.parent;
  }
  const rootPath = root === undefined ? undefined : rootPaths.get(root);
  if (rootPath === undefined) {
    throw new NotPlacedError(relativePathOf(node) || node.name);
  }
  return path.join(rootPath, relativePathOf(node));
}

/** Options of {@link dir}. */
export interface DirOptions {
  /** On-disk name; defaults to the property name the directory is declared under. */
  readonly name?: string;
}

/**
 * A directory of a tree. Its declared children are read-only properties of
 * the same name (see {@link dir}); subclasses add behaviour for special
 * directories (the data directory mounts, the ephemeral one wipes).
 */
export class Directory {
  readonly #requestedName: string | undefined;
  readonly #reservedNames: ReadonlySet<string>;
  readonly #children = new Map<string, TreeNode>();
  #populated = false;

  /**
   * Use {@link dir}, or {@link populate} for a subclass. A subclass that keeps
   * files of its own in the directory lists their names in `reservedNames` so
   * that no declared child can collide with them.
   */
  constructor(options: DirOptions = {}, reservedNames: readonly string[] = []) {
    if (options.name !== undefined) {
      validateName(options.name, "directory");
    }
    this.#requestedName = options.name;
    this.#reservedNames = new Set(reservedNames);
  }

  /** On-disk name; empty for the root of a tree. */
  get name(): string {
    return links.get(this)?.name ?? this.#requestedName ?? "";
  }

  /** Absolute path; throws {@link NotPlacedError} until the tree is placed. */
  get fullPath(): string {
    return fullPathOf(this);
  }

  /** Creates this directory, its missing parents and every directory declared below it. */
  async mkdirAll(mode = 0o700): Promise<void> {
    await fs.mkdir(this.fullPath, { recursive: true, mode });
    for (const child of this.#children.values()) {
      if (child instanceof Directory) {
        await child.mkdirAll(mode);
      }
    }
  }

  /**
   * Deletes temporary files left by interrupted writes in this directory and
   * every directory declared below it; returns their paths. Call at node
   * start, before anything writes: a live write's temporary file looks stale.
   */
  async removeStaleTemporaries(): Promise<string[]> {
    const removed = await removeStaleTemporaries(this.fullPath);
    for (const child of this.#children.values()) {
      if (child instanceof Directory) {
        removed.push(...(await child.removeStaleTemporaries()));
      }
    }
    return removed;
  }

  /** See {@link contentAccess}. By default a directory defers to its parent; a root protects nothing. */
  [contentAccess](file: File<unknown>): ContentProtection | undefined {
    return links.get(this)?.parent[contentAccess](file);
  }

  // A static block lends populate() access to private fields without making
  // an attach method public (and thereby a reserved child name).
  static {
    adoptChildren = (directory, children) => {
      if (directory.#populated) {
        throw new InvalidTreeError("a directory's children are declared once, when it is created");
      }
      // Everything is checked before anything is linked, so that a rejected
      // declaration leaves its would-be children free for another one.
      const adopted = Object.entries(children).map(([property, child]) => {
        const name = Directory.#checkChild(directory, property, child);
        return { property, child, name };
      });
      const names = new Set<string>();
      for (const { name } of adopted) {
        if (names.has(name)) {
          throw new InvalidTreeError(`two children are named ${JSON.stringify(name)} on disk`);
        }
        names.add(name);
      }
      directory.#populated = true;
      for (const { property, child, name } of adopted) {
        directory.#children.set(name, child);
        links.set(child, { parent: directory, name });
        Object.defineProperty(directory, property, { value: child, enumerable: true });
      }
    };
  }

  // Returns the on-disk name `child` gets under `directory`, or throws why it cannot be adopted.
  static #checkChild(directory: Directory, property: string, child: unknown): string {
    if (property === "") {
      throw new InvalidTreeError("a child's property name is empty");
    }
    if (property in directory) {
      throw new InvalidTreeError(
        `property "${property}" would shadow the directory member of that name; declare it under another property and set its on-disk name`,
      );
    }
    if (!(child instanceof Directory) && !(child instanceof File)) {
      throw new InvalidTreeError(`property "${property}" is not a dir() or file()`);
    }
    if (links.has(child) || (child instanceof Directory && rootPaths.has(child))) {
      throw new InvalidTreeError(`property "${property}": this node is already part of a tree`);
    }
    if (child instanceof File && child.isView) {
      throw new InvalidTreeError(`property "${property}": a view made by as() cannot be declared`);
    }
    for (let ancestor: Directory | undefined = directory; ancestor;) {
      if (ancestor === child) {
        throw new InvalidTreeError(`property "${property}": a directory cannot contain itself`);
      }
      ancestor = links.get(ancestor)?.parent;
    }
    const name = child instanceof File ? child.name : (child.#requestedName ?? property);
    validateName(name, `property "${property}"`);
    if (directory.#reservedNames.has(name)) {
      throw new InvalidTreeError(`name ${JSON.stringify(name)} is reserved by this directory`);
    }
    return name;
  }
}

// In the signatures below, NoInfer keeps TypeScript from inferring the
// children from where the result is used: a nested `dir({})` would otherwise
// take the parent's loose `Children` type and accept any property name.

/**
 * Gives an instance of a {@link Directory} subclass its children, typed: the
 * way special directories are declared (`populate(new DataDirectory(), {...})`).
 */
export function populate<D extends Directory, C extends Children = Record<never, never>>(
  directory: D,
  children: C & NoShadowing<D>,
): D & Readonly<NoInfer<C>> {
  adoptChildren(directory, children);
  return directory as D & Readonly<NoInfer<C>>;
}

/**
 * Declares a directory whose children are reachable as properties of the
 * same names: `dir({ metropolis: dir({ parameters: file("parameters.pb") }) })`.
 * Its on-disk name is the property name unless `options.name` says otherwise.
 */
export function dir<C extends Children = Record<never, never>>(
  children: C & NoShadowing<Directory>,
  options?: DirOptions,
): Directory & Readonly<NoInfer<C>> {
  return populate(new Directory(options), children);
}

/**
 * Fixes the location of a tree: `tree` (a root, not a subtree) is placed at
 * the absolute `rootPath`, and every node's `fullPath` is derived from it.
 * Placing is once per tree; returns `tree` for chaining.
 */
export function place<D extends Directory>(tree: D, rootPath: string): D {
  const link = links.get(tree);
  if (link !== undefined) {
    throw new PlacementError(
      `cannot place ${relativePathOf(tree)}: only the root of a tree can be placed`,
    );
  }
  const existing = rootPaths.get(tree);
  if (existing !== undefined) {
    throw new PlacementError(`tree is already placed at ${existing}`);
  }
  if (!path.isAbsolute(rootPath)) {
    throw new PlacementError(`root path ${JSON.stringify(rootPath)} is not absolute`);
  }
  rootPaths.set(tree, path.resolve(rootPath));
  return tree;
}

/** Options of {@link file}. */
export interface FileOptions {
  /**
   * The file holds a secret (a private key): under an encrypted data
   * directory it is stored AES-256-GCM encrypted and written with mode 0600.
   * Only valid below a data directory.
   */
  readonly secret?: boolean;
}

/** Options of {@link File.write}. */
export interface FileWriteOptions {
  /** Permission bits; default 0o600 for secret files, 0o644 otherwise. */
  readonly mode?: number;
  /** Fail with {@link FileExistsError} rather than replace an existing file. */
  readonly exclusive?: boolean;
}

/**
 * A file of a tree, holding a `T` (raw bytes unless declared with a codec).
 * Reads validate: a missing file is {@link FileMissingError}, content the codec
 * or the protection rejects is {@link FileCorruptedError}. Writes are atomic.
 */
export class File<T = Buffer> {
  /** On-disk name. */
  readonly name: string;
  /** Whether the file holds a secret; see {@link FileOptions.secret}. */
  readonly secret: boolean;
  readonly #codec: Codec<T>;
  // The declared file that a view made by as() reads and writes through.
  readonly #anchor: File<unknown> | undefined;

  /** Use {@link file}. */
  constructor(name: string, codec: Codec<T>, options: FileOptions = {}, anchor?: File<unknown>) {
    validateName(name, "file");
    this.name = name;
    this.secret = options.secret ?? false;
    this.#codec = codec;
    this.#anchor = anchor;
  }

  /** Whether this is a view made by {@link File.as}. */
  get isView(): boolean {
    return this.#anchor !== undefined;
  }

  /** Absolute path; throws {@link NotPlacedError} until the tree is placed. */
  get fullPath(): string {
    return fullPathOf(this.#declared());
  }

  /** Reads and decodes the file. */
  async read(): Promise<T> {
    const fullPath = this.fullPath;
    const protection = this.#protection();
    let stored: Buffer;
    try {
      stored = await fs.readFile(fullPath);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") {
        throw new FileMissingError(fullPath);
      }
      throw error;
    }
    const plaintext = protection === undefined ? stored : protection.open(this.#declared(), stored);
    try {
      return this.#codec.decode(plaintext);
    } catch (error) {
      throw new FileCorruptedError(fullPath, "content does not decode", error);
    }
  }

  /** Encodes `value` and replaces the file with it atomically (see `atomicWriteFile`). */
  async write(value: T, options: FileWriteOptions = {}): Promise<void> {
    const fullPath = this.fullPath;
    const protection = this.#protection();
    const encoded = this.#codec.encode(value);
    const plaintext = Buffer.from(encoded.buffer, encoded.byteOffset, encoded.byteLength);
    const stored =
      protection === undefined ? plaintext : protection.seal(this.#declared(), plaintext);
    await atomicWriteFile(fullPath, stored, {
      mode: options.mode ?? (this.secret ? 0o600 : 0o644),
      exclusive: options.exclusive,
    });
  }

  /** Whether the file exists (as a regular file). */
  async exists(): Promise<boolean> {
    const fullPath = this.fullPath;
    this.#protection();
    try {
      return (await fs.stat(fullPath)).isFile();
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") {
        return false;
      }
      throw error;
    }
  }

  /**
   * A view of the same file through another codec: how a layout declared
   * with raw bytes is read as a decoded message once its type is known.
   */
  as<U>(codec: Codec<U>): File<U> {
    return new File(this.name, codec, { secret: this.secret }, this.#declared());
  }

  #declared(): File<unknown> {
    return this.#anchor ?? this;
  }

  // Asks the ancestors whether the file may be touched at all (they throw if
  // not) and, for a secret file, how it is protected.
  #protection(): ContentProtection | undefined {
    const declared = this.#declared();
    const parent = links.get(declared)?.parent;
    const protection = parent?.[contentAccess](declared);
    if (!this.secret) {
      return undefined;
    }
    if (protection === undefined) {
      throw new InvalidTreeError(
        `secret file ${declared.fullPath} is not below a data directory that could protect it`,
      );
    }
    return protection;
  }
}

/** Declares a raw-bytes file named `name` on disk. */
export function file(name: string, options?: FileOptions): File<Buffer>;
/** Declares a file named `name` on disk whose content `codec` decodes and encodes. */
export function file<T>(name: string, options: FileOptions & { readonly codec: Codec<T> }): File<T>;
export function file<T>(
  name: string,
  options: FileOptions & { readonly codec?: Codec<T> } = {},
): File<T> | File<Buffer> {
  return options.codec === undefined
    ? new File(name, rawBytes, options)
    : new File(name, options.codec, options);
}
