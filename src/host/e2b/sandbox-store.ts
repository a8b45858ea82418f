/**
 * What the E2B control plane keeps of each sandbox beside its desktop: its id and the desktop
 * behind it, the template asked for, the metadata that filters lists, the environment handed to
 * envd, its tokens, its lease and its state. One JSON file (`<home>/.e2b/sandboxes.json`, mode
 * 0600 in a 0700 directory: it holds the tokens), rewritten atomically on every change, so that a
 * host service killed at any moment finds its sandboxes again. Changes are made one at a time, in
 * the order asked; the working copy is the file's last content.
 */
import { chmod, readFile } from "node:fs/promises";
import { dirname } from "node:path";
import { z } from "zod";
import { writeFileAtomic } from "../../common/atomic-write.js";
import { settled } from "../../common/settled.js";
import { makeDirectory } from "../../os/make-directory.js";

const recordSchema = z.object({
  sandboxID: z.string(),
  /** The desktop (the VM service's name) that is this sandbox. */
  desktop: z.string(),
  templateID: z.string(),
  /** The pool it was claimed from (its lease is then the claim's), or null. */
  pool: z.string().nullable(),
  metadata: z.record(z.string(), z.string()),
  envVars: z.record(z.string(), z.string()),
  /** envd's access token (`secure`), or null for a sandbox whose envd takes anyone. */
  envdAccessToken: z.string().nullable(),
  /** What its per-port URLs ask for, or null when they are public (`allowPublicTraffic`). */
  trafficAccessToken: z.string().nullable(),
  /** E2B's egress options as asked (the desktop's network policy says what is in force), or null. */
  egress: z
    .object({
      allowOut: z.array(z.string()),
      denyOut: z.array(z.string()),
      allowInternetAccess: z.boolean().nullable(),
    })
    .nullable()
    .default(null),
  /** `Host` sent to the sandbox's services (`${PORT}` replaced), or null for the one asked. */
  maskRequestHost: z.string().nullable(),
  startedAt: z.string(),
  /** When the lease runs out (ISO 8601); while paused, when it would have with the time left. */
  endAt: z.string(),
  /** The timeout asked at creation (seconds): what a refresh without a duration renews. */
  timeoutSeconds: z.number(),
  /** `creating` until its desktop is made and answers (a restart finds such a one half-made). */
  state: z.enum(["creating", "running", "paused"]),
  onTimeout: z.enum(["kill", "pause"]),
  /** Whether a pause at its timeout keeps its memory (E2B's `autoPauseMemory`, true by default). */
  pauseKeepsMemory: z.boolean().default(true),
  autoResume: z.boolean(),
});
export type SandboxRecord = z.infer<typeof recordSchema>;

const fileSchema = z.object({ sandboxes: z.array(recordSchema) });

export class SandboxStore {
  private records: Map<string, SandboxRecord> | undefined;
  private queue: Promise<void> = Promise.resolve();

  constructor(readonly file: string) {}

  /** Reads the file once (an absent file is no sandboxes); a damaged one is an error that names it. */
  async load(): Promise<SandboxRecord[]> {
    if (!this.records) {
      const text = await readFile(this.file, "utf8").catch((err: NodeJS.ErrnoException) => {
        if (err.code === "ENOENT") return undefined;
        throw err;
      });
      this.records = new Map();
      if (text !== undefined) {
        let parsed: unknown;
        try {
          parsed = JSON.parse(text);
        } catch {
          throw new Error(`The E2B sandbox file ${this.file} is not valid JSON: fix or remove it`);
        }
        const checked = fileSchema.safeParse(parsed);
        if (!checked.success) {
          const issue = checked.error.issues[0];
          throw new Error(
            `The E2B sandbox file ${this.file} is not as expected (${issue?.path.join(".")}: ${issue?.message}): fix or remove it`,
          );
        }
        for (const record of checked.data.sandboxes) this.records.set(record.sandboxID, record);
      }
    }
    return this.all();
  }

  all(): SandboxRecord[] {
    return [...(this.records?.values() ?? [])].map((r) => structuredClone(r));
  }

  get(sandboxID: string): SandboxRecord | undefined {
    const record = this.records?.get(sandboxID);
    return record && structuredClone(record);
  }

  /** The sandbox a desktop is, if any. */
  ofDesktop(desktop: string): SandboxRecord | undefined {
    for (const record of this.records?.values() ?? [])
      if (record.desktop === desktop) return structuredClone(record);
    return undefined;
  }

  put(record: SandboxRecord): Promise<void> {
    return this.change((records) => {
      records.set(record.sandboxID, structuredClone(record));
    });
  }

  /** Changes a sandbox by `change`; resolves to the stored result, or undefined when it is gone. */
  update(
    sandboxID: string,
    change: (record: SandboxRecord) => SandboxRecord,
  ): Promise<SandboxRecord | undefined> {
    return this.change((records) => {
      const found = records.get(sandboxID);
      if (!found) return undefined;
      const next = change(structuredClone(found));
      records.set(sandboxID, next);
      return structuredClone(next);
    });
  }

  remove(sandboxID: string): Promise<void> {
    return this.change((records) => {
      records.delete(sandboxID);
    });
  }

  async close() {
    await this.queue;
  }

  /** Applies `edit` to a copy and writes it; the copy becomes the state only once written. */
  private change<T>(edit: (records: Map<string, SandboxRecord>) => T): Promise<T> {
    const next = this.queue.then(async () => {
      if (!this.records) await this.load();
      const copy = new Map(this.records);
      const result = edit(copy);
      await makeDirectory(dirname(this.file));
      await chmod(dirname(this.file), 0o700);
      const text = JSON.stringify({ sandboxes: [...copy.values()] }, null, 1);
      await writeFileAtomic(this.file, `${text}\n`, { mode: 0o600 });
      this.records = copy;
      return result;
    });
    this.queue = settled(next);
    return next;
  }
}
