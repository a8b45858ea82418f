/**
 * An OpenAI computer-use agent (Responses API) on a Hangar desktop: `computer_use_preview` by
 * default, the GA `computer` tool (batched actions) with OPENAI_COMPUTER_TOOL=computer and a model
 * that has it in OPENAI_MODEL. With `hangar serve` running and the package built:
 *   OPENAI_API_KEY=… npx tsx examples/openai-agent.ts "Open a terminal and print the date"
 */
import { stdin, stdout } from "node:process";
import { createInterface } from "node:readline/promises";
import { Hangar, openaiComputerCallOutput } from "hangar/client";

const hangar = new Hangar({ url: process.env.HANGAR_URL ?? "http://127.0.0.1:8000" });
const display = { width: 1280, height: 800 };
const api = process.env.OPENAI_BASE_URL ?? "https://api.openai.com/v1";
// The GA tool declares no display: its coordinates are the screenshots' pixels, sent at `display`.
const tools =
  process.env.OPENAI_COMPUTER_TOOL === "computer"
    ? [{ type: "computer" }]
    : [
        {
          type: "computer_use_preview",
          display_width: display.width,
          display_height: display.height,
          environment: "linux",
        },
      ];
const task = process.argv[2] ?? "Take a screenshot and describe what is on the screen.";

async function respond(body: Record<string, unknown>) {
  const response = await fetch(`${api}/responses`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${process.env.OPENAI_API_KEY ?? ""}`,
      "content-type": "application/json",
    },
    body: JSON.stringify({
      model: process.env.OPENAI_MODEL ?? "computer-use-preview",
      tools,
      truncation: "auto",
      ...body,
    }),
  });
  if (!response.ok) throw new Error(`Responses API: HTTP ${response.status}: ${await response.text()}`);
  return response.json();
}

let response = await respond({ input: [{ role: "user", content: task }] });
for (let turn = 0; turn < 50; turn++) {
  const input = [];
  for (const item of response.output) {
    if (item.type === "message") for (const part of item.content) if (part.text) console.log(part.text);
    if (item.type !== "computer_call") continue;
    let acknowledge = false;
    if (item.pending_safety_checks?.length) {
      const ask = createInterface({ input: stdin, output: stdout });
      const messages = item.pending_safety_checks.map((check: { message: string }) => check.message);
      acknowledge = (await ask.question(`${messages.join("\n")}\nProceed? [y/N] `)).trim() === "y";
      ask.close();
      if (!acknowledge) process.exit(1);
    }
    input.push(
      await openaiComputerCallOutput(hangar, item, { display, acknowledgeSafetyChecks: acknowledge }),
    );
  }
  if (input.length === 0) break;
  response = await respond({ previous_response_id: response.id, input });
}
await hangar.close();
