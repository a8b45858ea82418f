/**
 * The generated descriptors are the e2b SDK's: packages, services, methods, messages, fields and
 * their numbers and types, decoded from the file descriptors the SDK ships in its bundle
 * (node_modules/e2b/dist), compared with Hangar's (file options aside: they only name other
 * languages' packages).
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fromBinary, toJson } from "@bufbuild/protobuf";
import { base64Decode } from "@bufbuild/protobuf/wire";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";

const here = new URL(".", import.meta.url);

/** Every `fileDesc("…")` of a source, decoded, by file name. */
function descriptors(source: string): Map<string, Record<string, unknown>> {
  const found = new Map<string, Record<string, unknown>>();
  for (const match of source.matchAll(/fileDesc\)?\(\s*["']([A-Za-z0-9+/=]+)["']/g)) {
    const json = toJson(
      FileDescriptorProtoSchema,
      fromBinary(FileDescriptorProtoSchema, base64Decode(match[1])),
    );
    const { options: _options, ...rest } = json as Record<string, unknown>;
    found.set(String(rest.name), rest);
  }
  return found;
}

describe("envd's wire format", () => {
  const sdkBundle = readFileSync(createRequire(import.meta.url).resolve("e2b"), "utf8");
  const sdk = descriptors(sdkBundle);

  for (const file of ["process/process.proto", "filesystem/filesystem.proto"]) {
    it(`${file} is the SDK's`, () => {
      const generated = readFileSync(new URL(`gen/${file.replace(".proto", "_pb.ts")}`, here), "utf8");
      const ours = descriptors(generated).get(file);
      expect(sdk.get(file)).toBeDefined();
      expect(ours).toEqual(sdk.get(file));
    });
  }
});
