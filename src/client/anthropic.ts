/**
 * `hangar/client/anthropic`: Claude's client toolsets on a Hangar desktop, as subclasses of the
 * Anthropic SDK's abstract toolsets. A subpath of its own, since it loads `@anthropic-ai/sdk` (an
 * optional peer dependency): `hangar/client` itself loads no SDK.
 */
export { HangarBrowserToolset, type HangarBrowserToolsetOptions } from "./browser-toolset.js";
export { HangarComputerToolset, type HangarComputerToolsetOptions } from "./computer-toolset.js";
export type { HangarTarget } from "./connect.js";
