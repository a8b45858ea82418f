/**
 * A container desktop's secrets, given to it as files and never as environment variables or
 * arguments: its VNC password and, when the service gives desktops keys, its own API key. Each
 * desktop has a directory `<root>/<container name>/`, mounted read-only at /run/secrets/hangar
 * (where the container's entry point looks, src/container/settings.ts). The root is 0700, so that
 * on the host only the service's user reaches the files; inside, the desktop's user reads them.
 */
import { randomBytes } from "node:crypto";
import { chmod, mkdir, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { makeDirectory } from "../../os/make-directory.js";

export const SECRETS_MOUNT = "/run/secrets/hangar";
const KEY_FILE = "api-keys";
const VNC_FILE = "vnc-password";

export interface DesktopSecretValues {
  vncPassword: string;
  apiKey?: string;
}

export class DesktopSecrets {
  constructor(readonly root: string) {}

  /**
   * Makes the desktop's secrets (a new VNC password, a new key when `keyed`); returns the directory.
   * With `rootOnly` (a container whose server runs as root, the agent as another user) only root
   * reads them inside; otherwise everyone does, as the desktop's user is not the service's (uid
   * 10001 in the image).
   */
  async make(container: string, keyed: boolean, rootOnly = false): Promise<string> {
    await makeDirectory(this.root);
    await chmod(this.root, 0o700);
    const dir = join(this.root, container);
    await rm(dir, { recursive: true, force: true });
    const [dirMode, fileMode] = rootOnly ? [0o700, 0o400] : [0o755, 0o444];
    await mkdir(dir, { mode: dirMode });
    await chmod(dir, dirMode);
    await writeFile(join(dir, VNC_FILE), `${randomBytes(6).toString("base64url")}\n`, { mode: fileMode });
    if (keyed) {
      await writeFile(join(dir, KEY_FILE), `${randomBytes(24).toString("base64url")}\n`, { mode: fileMode });
    }
    return dir;
  }

  async read(container: string): Promise<DesktopSecretValues> {
    const dir = join(this.root, container);
    const line = (file: string) =>
      readFile(join(dir, file), "utf8").then(
        (text) => text.split("\n")[0].trim() || undefined,
        () => undefined,
      );
    const [vncPassword, apiKey] = await Promise.all([line(VNC_FILE), line(KEY_FILE)]);
    return { vncPassword: vncPassword ?? "", apiKey };
  }

  dir(container: string): string {
    return join(this.root, container);
  }

  async remove(container: string) {
    await rm(join(this.root, container), { recursive: true, force: true });
  }

  /** Removes the directories of containers that no longer exist (a killed service's leftovers). */
  async sweep(existing: Set<string>) {
    const entries = await readdir(this.root).catch(() => [] as string[]);
    for (const entry of entries) {
      if (!existing.has(entry)) await rm(join(this.root, entry), { recursive: true, force: true });
    }
  }
}
