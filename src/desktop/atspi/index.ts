/**
 * Accessibility on Linux through AT-SPI over D-Bus.
 *
 * @example
 * const provider = atspiProvider(display.env); // or process.env
 * const a11y = await provider();
 * const { tree } = await a11y.tree({ maxDepth: 30, maxNodes: 2000 });
 */
import { CommandError } from "../../common/errors.js";
import type {
  AccessibilityBackend,
  AccessibilityProvider,
  AccessibleNode,
  AccessibleTree,
  TreeOptions,
} from "../accessibility.js";
import type { AccessibleRef, AtspiConnection } from "./connection.js";
import { parseElementId, readActions, readNode, readText, walkTree } from "./read.js";
import { encodeStates, IFACE, REGISTRY_ROOT } from "./states.js";

/**
 * `Collection.GetMatches`: a match rule (states, attributes, roles, interfaces, each with how it
 * matches, then whether to invert), the sort order, the most matches, and whether to walk the subtree.
 */
const GET_MATCHES = "(aiia{ss}iaiiasib)uib";
const MATCH_ALL = 1;
const SORT_CANONICAL = 1;
/** The rule: every element whose states include `focused` (the other criteria match anything). */
const FOCUSED_RULE = [
  encodeStates(["focused"]),
  MATCH_ALL,
  {},
  MATCH_ALL,
  [0, 0, 0, 0],
  MATCH_ALL,
  [],
  MATCH_ALL,
  false,
];

/** Action names that mean "click" in the toolkits, best first. */
const CLICK_ACTIONS = ["click", "press", "activate", "toggle", "jump", "open"];

export class AtspiAccessibility implements AccessibilityBackend {
  constructor(readonly connection: AtspiConnection) {}

  tree(options: TreeOptions): Promise<AccessibleTree> {
    return walkTree(this.connection, options);
  }

  async element(id: string): Promise<AccessibleNode> {
    const { node } = await this.read(id);
    return node;
  }

  async activate(id: string): Promise<string | null> {
    const { ref, interfaces } = await this.read(id);
    if (!interfaces.has(IFACE.action)) return null;
    const names = await readActions(this.connection, ref);
    if (names.length === 0) return null;
    const lower = names.map((n) => n.toLowerCase());
    const wanted = CLICK_ACTIONS.map((a) => lower.indexOf(a)).find((i) => i >= 0) ?? 0;
    const [done] = await this.connection.call<[boolean]>(ref, IFACE.action, "DoAction", "i", [wanted]);
    if (!done) throw new CommandError("failed", `The element refused its "${names[wanted]}" action: ${id}`);
    return names[wanted];
  }

  /**
   * The element that has the keyboard focus: each application is asked for its focused element
   * (one `GetMatches` each, in parallel); a toolkit says `focused` only while its window is active.
   * Null when none says so (or none implements Collection).
   */
  async focused(): Promise<AccessibleNode | null> {
    const [apps] = await this.connection.call<[[string, string][]]>(
      REGISTRY_ROOT,
      IFACE.accessible,
      "GetChildren",
    );
    const matches = await Promise.all(
      apps.map(([bus, path]) =>
        this.connection
          .call<[[string, string][]]>({ bus, path }, IFACE.collection, "GetMatches", GET_MATCHES, [
            FOCUSED_RULE,
            SORT_CANONICAL,
            1,
            true,
          ])
          .then(([found]) => found[0])
          .catch(() => undefined),
      ),
    );
    for (const match of matches) {
      if (!match) continue;
      const read = await readNode(this.connection, { bus: match[0], path: match[1] }, false).catch(
        () => null,
      );
      if (read) return read.node;
    }
    return null;
  }

  async focus(id: string): Promise<boolean> {
    const { ref, interfaces } = await this.read(id);
    if (!interfaces.has(IFACE.component)) return false;
    const [done] = await this.connection.call<[boolean]>(ref, IFACE.component, "GrabFocus");
    return done;
  }

  async setText(id: string, text: string): Promise<string> {
    const { ref, interfaces, node } = await this.read(id);
    if (!interfaces.has(IFACE.editableText)) {
      throw new CommandError(
        "not_supported",
        `The element is not editable text (it is a ${node.role}): ${id}`,
      );
    }
    const [done] = await this.connection.call<[boolean]>(ref, IFACE.editableText, "SetTextContents", "s", [
      text,
    ]);
    if (!done) throw new CommandError("failed", `The element refused the new text (is it read-only?): ${id}`);
    return readText(this.connection, ref);
  }

  private async read(id: string) {
    const ref = parseElementId(id);
    if (!ref) {
      throw new CommandError(
        "invalid_params",
        `Invalid params: id: not an element id (expected a bus name then an object path): ${id.slice(0, 200)}`,
      );
    }
    try {
      return { ref, ...(await readNode(this.connection, ref, false)) };
    } catch (err) {
      if (err instanceof CommandError && err.code !== "timeout") throw err;
      throw new CommandError(
        "not_found",
        `No such element (the application closed or the element is gone): ${id}`,
      );
    }
  }
}

/**
 * A provider that connects on first use to the accessibility bus of the desktop described by `env`
 * and connects again after the connection is lost. `env` is read at each connection attempt.
 */
export function atspiProvider(env: NodeJS.ProcessEnv | (() => NodeJS.ProcessEnv) = process.env) {
  let current: Promise<AtspiAccessibility> | undefined;
  const provider: AccessibilityProvider & { close(): void } = async () => {
    if (current) {
      const backend = await current.catch(() => undefined);
      if (backend?.connection.usable) return backend;
      current = undefined;
    }
    // dbus-next is loaded at the first accessibility command, not with the server.
    const attempt = import("./connection.js")
      .then(({ AtspiConnection }) => AtspiConnection.connect(typeof env === "function" ? env() : env))
      .then((conn) => new AtspiAccessibility(conn));
    current = attempt;
    attempt.catch(() => {
      if (current === attempt) current = undefined;
    });
    return attempt;
  };
  provider.close = () => {
    current?.then((backend) => backend.connection.close()).catch(() => undefined);
    current = undefined;
  };
  return provider;
}

export type { AccessibleRef };
