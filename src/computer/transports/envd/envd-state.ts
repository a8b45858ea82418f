/**
 * What envd keeps between requests: its access token, the variables and defaults `POST /init` set,
 * and who it acts as. Hangar's envd runs everything as the user its server runs as, or as the
 * command user (`--command-user`) when there is one: a request that names another user
 * (`Authorization: Basic user:`, `?username=`) is refused rather than run as someone it is not.
 *
 * The token comes from `--envd-token-file` (read once at start) or from the first `POST /init`, never
 * from a command line or an environment variable; it is compared in constant time and never logged.
 */
import { createHash } from "node:crypto";
import { userInfo } from "node:os";
import { Code, ConnectError } from "@connectrpc/connect";
import { z } from "zod";
import { sameText } from "../../../common/key-digests.js";
import { type CommandUser, userCwd } from "../../../os/command-user.js";
import { expandPath } from "../../../os/paths.js";

/** The envd version Hangar speaks: the e2b SDK turns on what that version has (stdin, octet-stream uploads, watch entries). */
export const ENVD_VERSION = "0.6.4";

/** `POST /init`'s body as the orchestrator sends it; fields Hangar has no use for are accepted and ignored. */
export const initBody = z.object({
  envVars: z
    .record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be a variable name"), z.string())
    .nullish(),
  accessToken: z.string().max(4096).nullish(),
  defaultUser: z.string().nullish(),
  defaultWorkdir: z.string().nullish(),
  timestamp: z.string().nullish(),
  hyperloopIP: z.string().nullish(),
  lifecycleID: z.string().nullish(),
  caBundle: z.string().nullish(),
  volumeMounts: z.array(z.unknown()).nullish(),
});
export type InitBody = z.infer<typeof initBody>;

/** An error of envd's HTTP routes: its status and message, sent as `{"code", "message"}`. */
export class EnvdHttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export class EnvdState {
  private token: string | undefined;
  private vars: Record<string, string> = {};
  private workdir: string | undefined;
  readonly user: string;
  /**
   * The account's home from the user database, as envd looks it up (not $HOME of the server); a
   * command user's that does not exist (nobody's /nonexistent) is `/`.
   */
  readonly home: string;

  /**
   * @param token from `--envd-token-file`, when given
   * @param commandUser the user processes run as (`--command-user`), when not the server's
   */
  constructor(token?: string, commandUser?: CommandUser) {
    this.token = token || undefined;
    const account = commandUser ? undefined : userInfo();
    this.user = commandUser?.name ?? account?.username ?? "";
    this.home = commandUser ? (userCwd(commandUser, undefined) ?? "/") : (account?.homedir ?? "/");
  }

  get secured(): boolean {
    return this.token !== undefined;
  }

  /** Variables from `POST /init`, given to every process envd starts. */
  get envVars(): Readonly<Record<string, string>> {
    return this.vars;
  }

  /** Whether the presented `X-Access-Token` opens envd: always when no token is set. */
  accepts(presented: string | undefined): boolean {
    if (this.token === undefined) return true;
    return presented !== undefined && sameText(presented, this.token);
  }

  /**
   * Whether a signed file URL (`?signature=v1_…`, as the SDK's `downloadUrl`/`uploadUrl` make them)
   * was made with this token for this path, operation and user, and has not expired.
   */
  acceptsSignature(
    signature: string,
    fields: { path: string; operation: "read" | "write"; username: string; expiration?: string },
  ): boolean {
    if (this.token === undefined) return true;
    const parts = [fields.path, fields.operation, fields.username, this.token];
    if (fields.expiration !== undefined) {
      if (!/^\d+$/.test(fields.expiration) || Number(fields.expiration) < Date.now() / 1000) return false;
      parts.push(fields.expiration);
    }
    const expected = `v1_${createHash("sha256").update(parts.join(":")).digest("base64").replace(/=+$/, "")}`;
    return sameText(signature, expected);
  }

  /**
   * `POST /init`: the first one sets the token (when none is set); later ones must present it, as
   * envd asks of a reset. Then the variables (replacing the earlier ones) and the defaults.
   */
  init(body: InitBody) {
    const presented = body.accessToken ?? undefined;
    if (this.token !== undefined) {
      if (presented === undefined) throw new EnvdHttpError(401, "access token reset not authorized");
      if (!sameText(presented, this.token)) throw new EnvdHttpError(401, "access token validation failed");
    }
    if (body.defaultUser) this.checkUser(body.defaultUser, (message) => new EnvdHttpError(400, message));
    let workdir = this.workdir;
    if (body.defaultWorkdir) {
      try {
        workdir = expandPath(body.defaultWorkdir, this.home, this.home);
      } catch (err) {
        throw new EnvdHttpError(400, `defaultWorkdir: ${(err as Error).message}`);
      }
    }
    if (presented) this.token = presented;
    if (body.envVars) this.vars = { ...body.envVars };
    this.workdir = workdir;
  }

  /**
   * A path of a request, absolute: `~` is the home directory, a relative path is taken from it, and
   * an empty one is the default working directory (the home directory unless `/init` set one).
   */
  resolve(path: string): string {
    if (path === "") return this.workdir ?? this.home;
    try {
      return expandPath(path, this.home, this.home);
    } catch (err) {
      throw new ConnectError(
        `path '${path.replaceAll("\0", "\\0")}': contains a NUL byte`,
        Code.InvalidArgument,
        undefined,
        undefined,
        err,
      );
    }
  }

  /** The user a request names, checked: undefined (the default) or this server's user. */
  checkUser(username: string | undefined, refuse: (message: string) => Error = permissionDenied) {
    if (username === undefined || username === "" || username === this.user) return;
    throw refuse(
      `user '${username}' is not available: Hangar's envd runs every process and file operation as ` +
        `'${this.user}'`,
    );
  }

  /** The user named by a request's `Authorization: Basic <user:>` header (what the SDK sends for `user`). */
  userOfHeader(authorization: string | null | undefined): string | undefined {
    const match = /^Basic\s+(\S+)$/i.exec(authorization ?? "");
    if (!match) return undefined;
    const decoded = Buffer.from(match[1], "base64").toString("utf8");
    const colon = decoded.indexOf(":");
    return colon < 0 ? decoded : decoded.slice(0, colon);
  }
}

function permissionDenied(message: string) {
  return new ConnectError(message, Code.PermissionDenied);
}
