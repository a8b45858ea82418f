/**
 * A Claude computer-use agent on a Hangar desktop: the loop forwards each tool call to
 * `computer_action` and sends back the tool result. With `hangar serve` running and the package built:
 *   ANTHROPIC_API_KEY=… npx tsx examples/claude-agent.ts "Open a terminal and print the date"
 */
import { anthropicToolResult, Hangar } from "hangar/client";

const hangar = new Hangar({ url: process.env.HANGAR_URL ?? "http://127.0.0.1:8000" });
const display = { width: 1280, height: 800 }; // what Claude sees; Hangar scales both ways
const api = process.env.ANTHROPIC_BASE_URL ?? "https://api.anthropic.com";
const task = process.argv[2] ?? "Take a screenshot and describe what is on the screen.";
const messages: { role: string; content: unknown }[] = [{ role: "user", content: task }];

for (let turn = 0; turn < 50; turn++) {
  const response = await fetch(`${api}/v1/messages`, {
    method: "POST",
    headers: {
      "x-api-key": process.env.ANTHROPIC_API_KEY ?? "",
      "anthropic-version": "2023-06-01",
      "anthropic-beta": "computer-use-2025-01-24",
      "content-type": "application/json",
    },
    body: JSON.stringify({
      model: process.env.ANTHROPIC_MODEL ?? "claude-sonnet-4-5",
      max_tokens: 4096,
      tools: [
        {
          type: "computer_20250124",
          name: "computer",
          display_width_px: display.width,
          display_height_px: display.height,
        },
      ],
      messages,
    }),
  });
  if (!response.ok) throw new Error(`Messages API: HTTP ${response.status}: ${await response.text()}`);
  const message = await response.json();
  messages.push({ role: "assistant", content: message.content });
  const results = [];
  for (const block of message.content) {
    if (block.type === "text") console.log(block.text);
    if (block.type === "tool_use") results.push(await anthropicToolResult(hangar, block, { display }));
  }
  if (results.length === 0) break;
  messages.push({ role: "user", content: results });
}
await hangar.close();
