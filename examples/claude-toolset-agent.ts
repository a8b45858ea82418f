/**
 * A Claude agent on a Hangar desktop with the client toolsets (`computer_toolset_20260801`, and the
 * browser toolset on the desktop's Chromium), run by the Anthropic SDK's tool runner. Typing and key
 * presses are shown to you first (the SDK asks for a `confirm` while they are on). With `hangar serve`
 * running and the package built:
 *   ANTHROPIC_API_KEY=… npx tsx examples/claude-toolset-agent.ts "Open example.org and read its heading"
 */
import { stdin, stdout } from "node:process";
import { createInterface } from "node:readline/promises";
import Anthropic from "@anthropic-ai/sdk";
import type { BetaComputerConfirmContext } from "@anthropic-ai/sdk/helpers/beta/toolsets";
import { HangarBrowserToolset, HangarComputerToolset } from "hangar/client/anthropic";

const url = process.env.HANGAR_URL ?? "http://127.0.0.1:8000";
const task = process.argv[2] ?? "Take a screenshot and describe what is on the screen.";

/** Typing and keys run only when you say so (escaped, so that what you read is what runs). */
async function confirm(ctx: BetaComputerConfirmContext): Promise<boolean> {
  if (!["type", "key", "hold_key"].includes(ctx.member)) return true;
  const shown = JSON.stringify(ctx.input).replace(
    /[^ -~]/gu,
    (c) => `\\u{${c.codePointAt(0)?.toString(16)}}`,
  );
  const prompt = createInterface({ input: stdin, output: stdout });
  const answer = await prompt.question(`${ctx.member} ${shown} — run it? [y/N] `);
  prompt.close();
  return answer.trim().toLowerCase() === "y";
}

const desktop = new HangarComputerToolset(url, { confirm }); // screenshots at about a megapixel
const browser = new HangarBrowserToolset(url); // navigate, read_page/find (ref_N), form_input, tabs
try {
  const runner = new Anthropic().beta.messages.toolRunner({
    model: process.env.ANTHROPIC_MODEL ?? "claude-sonnet-5-5",
    max_tokens: 4096,
    max_iterations: 50,
    tools: [desktop, browser],
    messages: [{ role: "user", content: task }],
  });
  for await (const message of runner) {
    for (const block of message.content) if (block.type === "text") console.log(block.text);
  }
} finally {
  await desktop.close();
  await browser.close();
}
