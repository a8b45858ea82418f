/** Every command of the computer server, one module per area. */
import type { AnyCommand } from "../src/computer/command.js";
import accessibility from "./accessibility.js";
import file from "./file.js";
import meta from "./meta.js";
import shell from "./shell.js";

export const allCommands: readonly AnyCommand[] = [...meta, ...shell, ...file, ...accessibility];
