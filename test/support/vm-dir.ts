/** Builds a VM directory as the host service lays it out: config.json, sparse disk.img, nvram.bin. */
import { randomBytes } from "node:crypto";
import { mkdir, open, readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";

export interface DiskWrite {
  offset: number;
  data: Buffer;
}

export async function makeVmDir(
  dir: string,
  options: { diskSize: number; writes: DiskWrite[]; config?: object },
) {
  await mkdir(dir, { recursive: true });
  const config = {
    os: "linux",
    cpuCount: 2,
    memorySize: 2 * 1024 ** 3,
    diskSize: options.diskSize,
    macAddress: "52:54:00:12:34:56",
    display: "1280x800",
    networkMode: "nat",
    ...options.config,
  };
  await writeFile(join(dir, "config.json"), JSON.stringify(config, null, 2));
  await writeFile(join(dir, "nvram.bin"), randomBytes(128 * 1024));
  const disk = await open(join(dir, "disk.img"), "w");
  await disk.truncate(options.diskSize);
  for (const w of options.writes) await disk.write(w.data, 0, w.data.length, w.offset);
  await disk.close();
  return config;
}

/** Bytes the file occupies on disk. */
export async function allocated(path: string): Promise<number> {
  return (await stat(path)).blocks * 512;
}

export async function readJson(path: string) {
  return JSON.parse(await readFile(path, "utf8"));
}
