/**
 * The host service's settings: one YAML file, `<XDG_CONFIG_HOME or ~/.config>/hangar/config.yaml`,
 * written with defaults on first read and atomically on every change. It holds the named storage
 * locations (`home` by default, the home directory), the default location, the image cache
 * directory, caching on/off and the address of Apple's restore-image catalog.
 *
 * Paths are stored as given (`~/.hangar`) and expanded when used.
 */
import { constants } from "node:fs";
import { access, readFile, stat } from "node:fs/promises";
import { homedir, tmpdir } from "node:os";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { parse, stringify } from "yaml";
import { z } from "zod";
import { writeFileAtomic } from "../common/atomic-write.js";
import { settled } from "../common/settled.js";
import { makeDirectory } from "../os/make-directory.js";
import { HostError } from "./errors.js";
import { locationName } from "./names.js";
import type { ConfigChange } from "./requests.js";

export const DEFAULT_IPSW_CATALOG =
  "https://mesu.apple.com/assets/macos/com_apple_macOSIPSW/com_apple_macOSIPSW.xml";

const settingsSchema = z.object({
  defaultLocationName: z.string().default("home"),
  cacheDirectory: z.string().default("~/.hangar/cache"),
  cachingEnabled: z.boolean().default(false),
  vmLocations: z
    .array(z.object({ name: z.string(), path: z.string() }))
    .default([{ name: "home", path: "~/.hangar" }]),
  registry: z
    .object({ registry: z.string().default("ghcr.io"), organization: z.string().default("trycua") })
    .default({ registry: "ghcr.io", organization: "trycua" }),
  ipswCatalogUrl: z.string().default(DEFAULT_IPSW_CATALOG),
  /**
   * Container desktops (flags of `hangar host serve` win): the engine's address, the desktop
   * image, and limits for the desktops' processes (`nofile=10000:10000`).
   */
  containers: z
    .object({
      engine: z.string().optional(),
      desktopImage: z.string().optional(),
      ulimits: z.array(z.string()).optional(),
    })
    .optional(),
});

export type Settings = z.infer<typeof settingsSchema>;

/** Where a VM lives: a named location, or a direct path given as `storage`. */
export interface Location {
  /** The location's name, or the raw path string when `storage` was a path (as lume reports it). */
  name: string;
  /** Absolute directory that holds the VM directories. */
  path: string;
}

export interface SettingsOptions {
  /** The user's config directory (XDG_CONFIG_HOME); default `$XDG_CONFIG_HOME` or `~/.config`. */
  configHome?: string;
  /** The user's home directory, for `~` (default the process's). */
  userHome?: string;
  /** Path of the `home` location when the settings file is first written (default `~/.hangar`). */
  defaultHomeDirectory?: string;
  /** Catalog address written into a new settings file. */
  ipswCatalogUrl?: string;
}

const HEADER = "# Hangar host service settings (hangar host serve). Edit with `hangar config` or by hand.\n";

export class SettingsStore {
  readonly file: string;
  readonly userHome: string;
  private cached?: { mtimeMs: number; size: number; settings: Settings };
  private writing: Promise<unknown> = Promise.resolve();

  constructor(private readonly options: SettingsOptions = {}) {
    this.userHome = options.userHome ?? homedir();
    const configHome = options.configHome ?? process.env.XDG_CONFIG_HOME ?? join(this.userHome, ".config");
    this.file = join(configHome, "hangar", "config.yaml");
  }

  /** Expands `~` against the user's home and makes the path absolute. */
  expand(path: string): string {
    if (path.includes("\0")) throw new HostError("invalid_params", "Invalid path: it contains a NUL byte");
    if (path === "~") return this.userHome;
    if (path.startsWith("~/")) return join(this.userHome, path.slice(2));
    return resolve(path);
  }

  /** The settings, re-read when the file changed (edits by hand take effect at once). */
  async read(): Promise<Settings> {
    const info = await stat(this.file).catch(() => undefined);
    if (!info) {
      const settings = settingsSchema.parse({
        vmLocations: [{ name: "home", path: this.options.defaultHomeDirectory ?? "~/.hangar" }],
        cacheDirectory: this.options.defaultHomeDirectory
          ? join(this.options.defaultHomeDirectory, "cache")
          : undefined,
        ipswCatalogUrl: this.options.ipswCatalogUrl,
      });
      await this.write(settings);
      return settings;
    }
    if (this.cached && this.cached.mtimeMs === info.mtimeMs && this.cached.size === info.size) {
      return structuredClone(this.cached.settings);
    }
    const text = await readFile(this.file, "utf8");
    let parsed: Settings;
    try {
      parsed = settingsSchema.parse(parse(text) ?? {});
    } catch (err) {
      throw new HostError("failed", `The settings file ${this.file} is not valid: ${(err as Error).message}`);
    }
    if (!parsed.vmLocations.some((l) => l.name === parsed.defaultLocationName)) {
      throw new HostError(
        "failed",
        `The settings file ${this.file} names a default location '${parsed.defaultLocationName}' that is not among vmLocations`,
      );
    }
    this.cached = { mtimeMs: info.mtimeMs, size: info.size, settings: parsed };
    return structuredClone(parsed);
  }

  /** Applies `change` to the current settings and saves them; changes are serialized. */
  update(change: (settings: Settings) => Promise<void> | void): Promise<Settings> {
    const next = this.writing.then(async () => {
      const settings = await this.read();
      await change(settings);
      await this.write(settings);
      return settings;
    });
    this.writing = settled(next);
    return next;
  }

  private async write(settings: Settings) {
    await makeDirectory(dirname(this.file));
    await writeFileAtomic(this.file, HEADER + stringify(settings));
    this.cached = undefined;
  }

  /** The directory of the `home` location (logs live under it). */
  async homeDirectory(): Promise<string> {
    const settings = await this.read();
    const home =
      settings.vmLocations.find((l) => l.name === "home") ??
      settings.vmLocations.find((l) => l.name === settings.defaultLocationName)!;
    return this.expand(home.path);
  }

  /**
   * Resolves a `storage` parameter: a path (it contains `/` or `\`), `ephemeral` (the temp
   * directory), or a location name. Without one, the default location.
   */
  async location(storage?: string | null): Promise<Location> {
    const settings = await this.read();
    if (storage === undefined || storage === null || storage === "") {
      const named = settings.vmLocations.find((l) => l.name === settings.defaultLocationName)!;
      return { name: named.name, path: this.expand(named.path) };
    }
    if (/[/\\]/.test(storage)) return { name: storage, path: this.expand(storedPath(storage)) };
    if (storage === "ephemeral") return { name: storage, path: tmpdir() };
    const named = settings.vmLocations.find((l) => l.name === storage);
    if (!named) throw new HostError("not_found", `VM location not found: ${storage}`);
    return { name: named.name, path: this.expand(named.path) };
  }

  /** The locations to search for a VM: the one `storage` names, or every configured one in order. */
  async searchLocations(storage?: string | null): Promise<Location[]> {
    if (storage) return [await this.location(storage)];
    const settings = await this.read();
    return settings.vmLocations.map((l) => ({ name: l.name, path: this.expand(l.path) }));
  }

  async addLocation(name: string, path: string) {
    locationName(name);
    const stored = storedPath(path);
    await this.update(async (settings) => {
      if (settings.vmLocations.some((l) => l.name === name)) {
        throw new HostError("failed", `VM location with name '${name}' already exists`);
      }
      await ensureWritableDirectory(this.expand(stored));
      settings.vmLocations.push({ name, path: stored });
    });
    return stored;
  }

  async removeLocation(name: string) {
    await this.update((settings) => {
      if (!settings.vmLocations.some((l) => l.name === name)) {
        throw new HostError("not_found", `VM location not found: ${name}`);
      }
      if (settings.defaultLocationName === name) {
        throw new HostError(
          "failed",
          `Cannot remove the default location '${name}'. Set a new default location first.`,
        );
      }
      settings.vmLocations = settings.vmLocations.filter((l) => l.name !== name);
    });
  }

  async setDefaultLocation(name: string) {
    await this.update((settings) => {
      if (!settings.vmLocations.some((l) => l.name === name)) {
        throw new HostError("not_found", `VM location not found: ${name}`);
      }
      settings.defaultLocationName = name;
    });
  }

  /** POST /svc/config: validates every change first, then saves them together. */
  async configure(change: ConfigChange) {
    const home = change.homeDirectory === undefined ? undefined : storedPath(change.homeDirectory);
    const cache = change.cacheDirectory === undefined ? undefined : storedPath(change.cacheDirectory);
    if (home !== undefined) await ensureWritableDirectory(this.expand(home));
    if (cache !== undefined) await ensureWritableDirectory(this.expand(cache));
    await this.update((settings) => {
      if (home !== undefined) {
        const entry = settings.vmLocations.find((l) => l.name === "home");
        if (entry) entry.path = home;
        else settings.vmLocations.unshift({ name: "home", path: home });
      }
      if (cache !== undefined) settings.cacheDirectory = cache;
      if (change.cachingEnabled !== undefined) settings.cachingEnabled = change.cachingEnabled;
      if (change.ipswCatalogUrl !== undefined) settings.ipswCatalogUrl = change.ipswCatalogUrl;
    });
  }
}

/**
 * A path from a request: absolute or `~/…`, kept as given. A relative path is refused: it would
 * mean the service's working directory, which no client knows.
 */
function storedPath(path: string): string {
  if (path.trim() === "") throw new HostError("invalid_params", "Invalid path: it is empty");
  if (path.includes("\0")) throw new HostError("invalid_params", "Invalid path: it contains a NUL byte");
  if (path === "~" || path.startsWith("~/") || isAbsolute(path)) return path;
  throw new HostError(
    "invalid_params",
    `Invalid path '${path}': use an absolute path (or one starting with ~/), not one relative to the service's directory`,
  );
}

/** Creates the directory when missing; fails with lume's messages when it is not a writable directory. */
export async function ensureWritableDirectory(path: string) {
  const info = await stat(path).catch(() => undefined);
  if (info && !info.isDirectory()) throw new HostError("failed", `Path is not a directory: ${path}`);
  if (!info) {
    try {
      await makeDirectory(path);
    } catch (err) {
      throw new HostError(
        "failed",
        `Failed to create directory at ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
      );
    }
  }
  try {
    await access(path, constants.W_OK);
  } catch {
    throw new HostError("failed", `Directory is not writable: ${path}`);
  }
}
