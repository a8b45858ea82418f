/**
 * The import graph keeps the rooms of design.md and docs/architecture.md: no cycles, and imports
 * only go down the layers (commands → the computer's core is the one way between the two halves of
 * the computer server; transports never import a command; the host service stands apart).
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import madge from "madge";
import ts from "typescript";
import { beforeAll, describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

/**
 * Lower layers first (docs/architecture.md draws them the other way up); a module may import its own
 * layer and the ones before it. The composition root (`src/computer/server.ts`) is above the commands
 * it composes, the computer's core below them.
 */
const LAYERS: [layer: string, pattern: RegExp][] = [
  ["common", /^src\/common\//],
  ["os", /^src\/os\//],
  ["desktop and browser", /^src\/(desktop|browser)\//],
  ["host service", /^src\/host\//],
  ["computer core", /^src\/computer\/core\//],
  ["commands", /^commands\//],
  ["transports", /^src\/computer\/(http|auth|transports)\/|^src\/computer\/tls\.ts$/],
  ["computer server", /^src\/computer\/(app|server)\.ts$/],
  ["entry points and the client", /^src\/(cli|container|client)\//],
];

/** Imports that the layers would allow but the design does not. */
const FORBIDDEN: [from: RegExp, to: RegExp, why: string][] = [
  [/^src\/computer\/(http|auth|transports)\//, /^commands\//, "a transport never knows a command"],
  [/^src\/host\//, /^(src\/computer|src\/desktop|src\/browser|commands)\//, "the host service stands apart"],
  [/^src\/(desktop|browser)\//, /^src\/host\//, "desktop backends do not know the host service"],
  [/^src\/client\//, /^src\/(computer|desktop|host|os|browser|cli)\//, "the client loads none of the server"],
  [/^src\/host\/qemu\//, /^src\/host\/(container|kubernetes)\//, "a runtime knows no other runtime"],
  [/^src\/host\/container\//, /^src\/host\/(qemu|kubernetes)\//, "a runtime knows no other runtime"],
  [/^src\/host\/kubernetes\//, /^src\/host\/(qemu|container)\//, "a runtime knows no other runtime"],
  [
    /^src\/host\/(desktops|pools)\//,
    /^src\/host\/(qemu|container|kubernetes)\//,
    "the desktop service and the pools know runtimes by their interface (desktops/runtime.ts) alone",
  ],
];

const layerOf = (file: string) => LAYERS.findIndex(([, pattern]) => pattern.test(file));

let graph: Record<string, string[]>;
let cycles: string[][];
beforeAll(async () => {
  const result = await madge(["src", "commands"], {
    baseDir: ROOT,
    fileExtensions: ["ts"],
    tsConfig: `${ROOT}/tsconfig.json`,
    // Unit tests sit beside their modules; they are not part of the program.
    excludeRegExp: [/\.test\.ts$/],
  });
  graph = result.obj();
  cycles = result.circular();
}, 60_000);

describe("the import graph", () => {
  it("sees every module of the computer server and the host service", () => {
    const files = Object.keys(graph);
    for (const module of [
      "src/computer/core/registry.ts",
      "src/computer/transports/ws/ws.ts",
      "src/host/app.ts",
    ]) {
      expect(files).toContain(module);
    }
    expect(files.filter((f) => layerOf(f) === -1)).toEqual([]);
  });

  it("has no cycles", () => {
    expect(cycles).toEqual([]);
  });

  it("only imports down the layers", () => {
    const upward = Object.entries(graph).flatMap(([file, imports]) =>
      imports
        .filter((target) => layerOf(target) > layerOf(file))
        .map(
          (target) =>
            `${file} (${LAYERS[layerOf(file)][0]}) imports ${target} (${LAYERS[layerOf(target)][0]})`,
        ),
    );
    expect(upward).toEqual([]);
  });

  it("keeps transports from commands and the host service apart", () => {
    const broken = Object.entries(graph).flatMap(([file, imports]) =>
      FORBIDDEN.flatMap(([from, to, why]) =>
        from.test(file) ? imports.filter((t) => to.test(t)).map((t) => `${file} imports ${t}: ${why}`) : [],
      ),
    );
    expect(broken).toEqual([]);
  });
});

/**
 * The agent SDKs (Anthropic's, OpenAI's, Google's) are optional peer dependencies of the client's
 * adapters (`hangar/client/anthropic`, `hangar/client/openai-agents`): the servers run without them,
 * so no module outside `src/client/` loads one at run time (a type-only import is erased).
 */
const AGENT_SDKS = /^(@anthropic-ai\/sdk|@openai\/agents(-[a-z]+)?|@google\/genai|openai)(\/|$)/;

describe("the agent SDKs", () => {
  it("are loaded by the client alone, never by the servers", () => {
    const files = Object.keys(graph).filter((file) => !/^src\/client\//.test(file));
    expect(files.length).toBeGreaterThan(100);
    const loads = files.flatMap((file) =>
      runtimeImports(readFileSync(`${ROOT}/${file}`, "utf8"))
        .filter((spec) => AGENT_SDKS.test(spec))
        .map((spec) => `${file} loads ${spec}`),
    );
    expect(loads).toEqual([]);
  });

  it("are told apart from other packages", () => {
    const source = [
      'import Anthropic from "@anthropic-ai/sdk";',
      'import type { Computer } from "@openai/agents";',
      'import { type Part } from "@google/genai";',
      'export { x } from "@openai/agents-core/model";',
      'const m = await import("openai");',
      'import { z } from "zod";',
    ].join("\n");
    expect(runtimeImports(source).filter((spec) => AGENT_SDKS.test(spec))).toEqual([
      "@anthropic-ai/sdk",
      "@openai/agents-core/model",
      "openai",
    ]);
  });
});

/**
 * What a transport or the core knows of a command is what its definition says (`input`, `pointer`,
 * `capture`, a bytes field's media type), never its name: a string literal naming a command there
 * is a list that the next command would have to be added to.
 */
describe("the transports and the core", () => {
  it("name no command in their code", async () => {
    const { allCommands } = await import("../commands/index.js");
    const names = new Set(allCommands.map((def) => def.name));
    const files = Object.keys(graph).filter((file) =>
      /^src\/computer\/(core|transports|http|auth)\//.test(file),
    );
    expect(files.length).toBeGreaterThan(20);
    const named = files.flatMap((file) =>
      stringLiterals(readFileSync(`${ROOT}/${file}`, "utf8"))
        .filter((text) => names.has(text) && !NOT_A_COMMAND[file]?.includes(text))
        .map((text) => `${file} names "${text}"`),
    );
    expect(named).toEqual([]);
  });
});

/** Words that are also command names but mean something else where they are. */
const NOT_A_COMMAND: Record<string, string[]> = {
  // The client named in the timeline for the steps a command runs through `ctx.run` (batch's, computer_action's).
  "src/computer/core/registry.ts": ["batch"],
};

/** The string literals of a TypeScript source (comments are not code). */
function stringLiterals(source: string): string[] {
  const found: string[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) found.push(node.text);
    ts.forEachChild(node, visit);
  };
  visit(ts.createSourceFile("module.ts", source, ts.ScriptTarget.Latest, false));
  return found;
}

/**
 * The modules a TypeScript source loads at run time: its imports and re-exports that are not
 * type-only (all-type named imports are erased too), and its `import()` and `require()` calls.
 */
function runtimeImports(source: string): string[] {
  const found: string[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      const clause = node.importClause;
      const named = clause?.namedBindings;
      const erased =
        clause?.isTypeOnly ||
        (clause &&
          !clause.name &&
          named &&
          ts.isNamedImports(named) &&
          named.elements.every((e) => e.isTypeOnly));
      if (!erased) found.push(node.moduleSpecifier.text);
    } else if (
      ts.isExportDeclaration(node) &&
      node.moduleSpecifier &&
      ts.isStringLiteral(node.moduleSpecifier)
    ) {
      if (!node.isTypeOnly) found.push(node.moduleSpecifier.text);
    } else if (
      ts.isCallExpression(node) &&
      node.arguments.length > 0 &&
      ts.isStringLiteral(node.arguments[0])
    ) {
      const callee = node.expression;
      const loads =
        callee.kind === ts.SyntaxKind.ImportKeyword || (ts.isIdentifier(callee) && callee.text === "require");
      if (loads) found.push(node.arguments[0].text);
    }
    ts.forEachChild(node, visit);
  };
  visit(ts.createSourceFile("module.ts", source, ts.ScriptTarget.Latest, false));
  return found;
}
