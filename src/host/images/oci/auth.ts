/**
 * Registry authentication driven by the registry's `WWW-Authenticate` challenge: HTTP Basic with
 * the credentials, or a Bearer token from the token service the challenge names (fetched with
 * the credentials as Basic, or anonymously when there are none).
 */
export interface Credentials {
  username: string;
  password: string;
}

/**
 * Credentials from the environment: `HANGAR_REGISTRY_USERNAME`/`HANGAR_REGISTRY_PASSWORD` first,
 * then lume's `GITHUB_USERNAME`/`GITHUB_TOKEN` (and `GHCR_USERNAME`/`GHCR_TOKEN`). None: anonymous.
 */
export function credentialsFromEnv(env: NodeJS.ProcessEnv = process.env): Credentials | undefined {
  const pairs: [string | undefined, string | undefined][] = [
    [env.HANGAR_REGISTRY_USERNAME, env.HANGAR_REGISTRY_PASSWORD],
    [env.GITHUB_USERNAME ?? env.GHCR_USERNAME, env.GITHUB_TOKEN ?? env.GHCR_TOKEN],
  ];
  for (const [username, password] of pairs) {
    if (username && password) return { username, password };
  }
  return undefined;
}

export interface Challenge {
  scheme: string;
  params: Record<string, string>;
}

/** Parses `Bearer realm="…",service="…",scope="…"` (or `Basic realm="…"`). */
export function parseChallenge(header: string | null): Challenge | undefined {
  if (!header) return undefined;
  const match = /^\s*([A-Za-z]+)\s*(.*)$/.exec(header);
  if (!match) return undefined;
  const params: Record<string, string> = {};
  const pattern = /([A-Za-z_]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]*))/g;
  for (let m = pattern.exec(match[2]); m; m = pattern.exec(match[2])) {
    params[m[1].toLowerCase()] = m[2] !== undefined ? m[2].replace(/\\(.)/g, "$1") : m[3];
  }
  return { scheme: match[1].toLowerCase(), params };
}

export function basicHeader(credentials: Credentials): string {
  return `Basic ${Buffer.from(`${credentials.username}:${credentials.password}`).toString("base64")}`;
}
