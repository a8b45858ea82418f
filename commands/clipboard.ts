/** Clipboard commands. `copy_to_clipboard` reads the clipboard (cua's name for it). */
import { z } from "zod";
import { defineCommand } from "../src/computer/core/command.js";

export const copyToClipboard = defineCommand({
  name: "copy_to_clipboard",
  description: "Reads the clipboard's text (the name is cua's). The result is the text itself.",
  params: z.object({}),
  result: z.string(),
  handler: async (_params, ctx) => (await ctx.desktop()).readClipboard(),
});

export const setClipboard = defineCommand({
  name: "set_clipboard",
  description: "Puts text on the clipboard.",
  params: z.object({ text: z.string().max(16 * 1024 * 1024) }),
  result: z.object({}),
  handler: async ({ text }, ctx) => {
    await (await ctx.desktop()).writeClipboard(text);
    return {};
  },
});

export default [copyToClipboard, setClipboard];
