/**
 * The secrets the egress proxy adds to desktops' requests (docs/egress.md): kept by the host
 * service alone, in `<home>/.egress/secrets.json` (mode 0600, in a 0700 directory), set with
 * `POST /svc/secrets` and never given back: a listing shows names and dates only. A secret's value
 * is never logged, put in an environment, a command line or a desktop.
 */
import { mkdir, readFile } from "node:fs/promises";
import { dirname } from "node:path";
import { z } from "zod";
import { writeFileAtomic } from "../../common/atomic-write.js";
import { HostError } from "../errors.js";
import { SECRET_NAME } from "./policy.js";

/** The most secrets the host keeps, and the longest value. */
export const MAX_SECRETS = 256;
export const MAX_SECRET_BYTES = 8192;

export const secretSchema = z.strictObject({
  name: z.string().regex(SECRET_NAME, {
    error: "expected letters, digits and _ . - (at most 64), starting with a letter or digit",
  }),
  value: z
    .string()
    .min(1, { error: "a secret cannot be empty" })
    .max(MAX_SECRET_BYTES, { error: `at most ${MAX_SECRET_BYTES} characters` })
    // It goes into an HTTP header: printable ASCII and tabs, nothing that ends a line.
    .regex(/^[\t\x20-\x7e]+$/, {
      error: "expected printable ASCII on one line (it is sent in an HTTP header)",
    }),
});
export type SecretRequest = z.infer<typeof secretSchema>;

interface Kept {
  value: string;
  createdAt: string;
  updatedAt: string;
}

/** What `GET /svc/secrets` shows of a secret. */
export interface SecretInfo {
  name: string;
  createdAt: string;
  updatedAt: string;
}

export class SecretStore {
  private secrets = new Map<string, Kept>();
  private writes: Promise<unknown> = Promise.resolve();

  constructor(private readonly file: () => Promise<string>) {}

  async load() {
    const text = await readFile(await this.file(), "utf8").catch((err: NodeJS.ErrnoException) => {
      if (err.code === "ENOENT") return "{}";
      throw err;
    });
    this.secrets = new Map(Object.entries(JSON.parse(text) as Record<string, Kept>));
  }

  list(): SecretInfo[] {
    return [...this.secrets]
      .map(([name, kept]) => ({ name, createdAt: kept.createdAt, updatedAt: kept.updatedAt }))
      .sort((a, b) => a.name.localeCompare(b.name));
  }

  has(name: string): boolean {
    return this.secrets.has(name);
  }

  /** The value, for the proxy alone. */
  value(name: string): string | undefined {
    return this.secrets.get(name)?.value;
  }

  /** Sets a secret (a new one, or a new value); true when it is new. */
  async set({ name, value }: SecretRequest): Promise<boolean> {
    const old = this.secrets.get(name);
    if (!old && this.secrets.size >= MAX_SECRETS) {
      throw new HostError(
        "invalid_params",
        `The host keeps at most ${MAX_SECRETS} secrets: delete one first`,
      );
    }
    const now = new Date().toISOString();
    this.secrets.set(name, { value, createdAt: old?.createdAt ?? now, updatedAt: now });
    await this.save();
    return !old;
  }

  async remove(name: string) {
    if (!this.secrets.delete(name)) throw new HostError("not_found", `Secret not found: ${name}`);
    await this.save();
  }

  private save(): Promise<void> {
    const write = this.writes.then(async () => {
      const file = await this.file();
      await mkdir(dirname(file), { recursive: true, mode: 0o700 });
      await writeFileAtomic(file, `${JSON.stringify(Object.fromEntries(this.secrets))}\n`, { mode: 0o600 });
    });
    this.writes = write.catch(() => undefined);
    return write;
  }
}
