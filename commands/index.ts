/** Every command of the computer server, one module per area. */
import type { AnyCommand } from "../src/computer/core/command.js";
import accessibility from "./accessibility.js";
import browser from "./browser.js";
import clipboard from "./clipboard.js";
import computerAction from "./computer-action/index.js";
import control from "./control.js";
import file from "./file.js";
import input from "./input.js";
import meta from "./meta.js";
import recording from "./recording.js";
import screenshot from "./screenshot.js";
import shell from "./shell.js";
import trajectory from "./trajectory.js";
import window from "./window.js";

/** Every definition with its own types: the typed client (`hangar/client`) is derived from it. */
export const commandDefinitions = [
  ...meta,
  ...shell,
  ...file,
  ...screenshot,
  ...input,
  ...clipboard,
  ...window,
  ...accessibility,
  ...browser,
  ...computerAction,
  ...recording,
  ...trajectory,
  ...control,
];

/** The definitions as the registry stores them. */
export const allCommands: readonly AnyCommand[] = commandDefinitions;

/** The union of every command definition, each with its literal name. */
export type CommandDefinitions = (typeof commandDefinitions)[number];
