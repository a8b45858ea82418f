/**
 * Cloud mode from flags and environment. It is on only when there is a container name AND a way
 * to check keys (at least one API key, or a remote verifier URL); a container name alone (the
 * `CONTAINER_NAME` that cua images set everywhere) leaves the server in local mode.
 */
import { closeSync, readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { KeyDigests, parseKeyLines, parseKeyList } from "../../common/key-digests.js";
import type { CloudAuthOptions } from "./authenticator.js";
import { API_KEYS_ENV, API_KEYS_FD_ENV } from "./key-env.js";
import { remoteVerifier } from "./verifier.js";

export interface CloudSettings {
  /** `--container-name`; falls back to `CONTAINER_NAME`. */
  containerName?: string;
  /** `--api-key-file`: one key per line, or `sha256:<hex>` digests. */
  apiKeyFile?: string;
  /** `--auth-url`; falls back to `HANGAR_AUTH_URL`. */
  authUrl?: string;
  env?: NodeJS.ProcessEnv;
}

/** Returns the cloud auth options, or undefined for local mode; throws on a half-done setup. */
export async function resolveCloudAuth(settings: CloudSettings): Promise<CloudAuthOptions | undefined> {
  const env = settings.env ?? process.env;
  const containerName = (settings.containerName ?? env.CONTAINER_NAME ?? "").trim();
  const digests = [];
  if (settings.apiKeyFile) {
    let text: string;
    try {
      text = await readFile(settings.apiKeyFile, "utf8");
    } catch (err) {
      throw new Error(`--api-key-file: cannot read ${settings.apiKeyFile}: ${(err as Error).message}`);
    }
    digests.push(...parseKeyLines(text, settings.apiKeyFile));
    if (digests.length === 0) throw new Error(`--api-key-file: ${settings.apiKeyFile} holds no key`);
  }
  if (env[API_KEYS_ENV]) digests.push(...parseKeyList(env[API_KEYS_ENV], API_KEYS_ENV));
  const keysFd = Number(env[API_KEYS_FD_ENV]);
  if (env[API_KEYS_FD_ENV] && Number.isSafeInteger(keysFd)) {
    digests.push(...parseKeyList(readAndClose(keysFd), API_KEYS_ENV));
  }
  const authUrl = settings.authUrl ?? env.HANGAR_AUTH_URL;

  if (digests.length > 0 && authUrl) {
    throw new Error("give either API keys (--api-key-file, HANGAR_API_KEYS) or --auth-url, not both");
  }
  if (digests.length === 0 && !authUrl) return undefined;
  if (!containerName) {
    throw new Error(
      "API keys or --auth-url were given but no container name (--container-name or CONTAINER_NAME)",
    );
  }
  if (containerName.length > 253 || /[\s\p{Cc}]/u.test(containerName)) {
    throw new Error(
      "the container name must be at most 253 characters, without spaces or control characters",
    );
  }
  if (authUrl) return { containerName, verify: remoteVerifier({ baseUrl: authUrl }) };
  return { containerName, keys: new KeyDigests(digests) };
}

/** The whole content of an inherited descriptor (a pipe from the launcher), which is then closed. */
function readAndClose(fd: number): string {
  try {
    return readFileSync(fd, "utf8");
  } catch (err) {
    throw new Error(`${API_KEYS_FD_ENV}: cannot read descriptor ${fd}: ${(err as Error).message}`);
  } finally {
    try {
      closeSync(fd);
    } catch {
      // already closed
    }
  }
}
