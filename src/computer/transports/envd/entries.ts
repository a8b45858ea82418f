/**
 * envd's `EntryInfo` of a path, as envd fills it: the entry itself (`lstat`), but for a symbolic link
 * the type and permission bits of what it leads to and the resolved target; `permissions` as Go
 * prints a file mode (`drwxr-xr-x`, `Lrwxrwxrwx`); owner and group by name where the system has one.
 */
import { readFile } from "node:fs/promises";
import { basename } from "node:path";
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { FileInfo, FileSystem } from "../../../common/file-system.js";
import { type EntryInfo, EntryInfoSchema, FileType } from "./gen/filesystem/filesystem_pb.js";

/** The entry at `path` (absolute); rejects with the OS error (ENOENT when there is none). */
export async function entryInfo(path: string, files: FileSystem): Promise<EntryInfo> {
  const info = await files.lstat(path);
  let type = fileType(info);
  let mode = info.mode & 0o777;
  let symlinkTarget: string | undefined;
  if (info.isSymbolicLink()) {
    symlinkTarget = await files.realpath(path).catch(() => path);
    const target = await files.stat(path).catch(() => undefined);
    type = target ? fileType(target) : FileType.UNSPECIFIED;
    mode = target ? target.mode & 0o777 : 0;
  }
  const names = await accountNames();
  return create(EntryInfoSchema, {
    name: basename(path),
    type,
    path,
    size: BigInt(info.size),
    mode,
    permissions: modeString(info),
    owner: names.users.get(info.uid) ?? String(info.uid),
    group: names.groups.get(info.gid) ?? String(info.gid),
    modifiedTime: timestampFromMs(Math.trunc(info.mtimeMs)),
    symlinkTarget,
  });
}

function fileType(info: FileInfo): FileType {
  if (info.isFile()) return FileType.FILE;
  if (info.isDirectory()) return FileType.DIRECTORY;
  if (info.isSymbolicLink()) return FileType.SYMLINK;
  return FileType.UNSPECIFIED;
}

/** A mode as Go's `FileMode.String()` writes it: type and special letters (or `-`), then `rwxrwxrwx`. */
export function modeString(info: FileInfo): string {
  let letters = "";
  if (info.isDirectory()) letters += "d";
  if (info.isSymbolicLink()) letters += "L";
  if (info.isBlockDevice() || info.isCharacterDevice()) letters += "D";
  if (info.isFIFO()) letters += "p";
  if (info.isSocket()) letters += "S";
  if (info.mode & 0o4000) letters += "u";
  if (info.mode & 0o2000) letters += "g";
  if (info.isCharacterDevice()) letters += "c";
  if (info.mode & 0o1000) letters += "t";
  let bits = "";
  for (let i = 8; i >= 0; i--) bits += info.mode & (1 << i) ? "rwx"[(8 - i) % 3] : "-";
  return (letters || "-") + bits;
}

interface AccountNames {
  users: Map<number, string>;
  groups: Map<number, string>;
}

/** Names of users and groups from /etc/passwd and /etc/group, read again after a few seconds. */
let names: { read: number; value: Promise<AccountNames> } | undefined;
const NAMES_TTL_MS = 10_000;

function accountNames(): Promise<AccountNames> {
  if (!names || Date.now() - names.read > NAMES_TTL_MS) {
    names = {
      read: Date.now(),
      value: Promise.all([idNames("/etc/passwd"), idNames("/etc/group")]).then(([users, groups]) => ({
        users,
        groups,
      })),
    };
  }
  return names.value;
}

/** `name:x:id:…` lines → id → name (the first name of an id wins); empty when the file cannot be read. */
async function idNames(file: string): Promise<Map<number, string>> {
  const map = new Map<number, string>();
  const text = await readFile(file, "utf8").catch(() => "");
  for (const line of text.split("\n")) {
    const [name, , id] = line.split(":");
    const number = Number(id);
    if (name && id && Number.isInteger(number) && !map.has(number)) map.set(number, name);
  }
  return map;
}
