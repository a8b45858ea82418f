/**
 * An OpenAI Agents SDK agent on a Hangar desktop: `HangarComputer` is the SDK's `Computer`, so its
 * `computerTool` drives the desktop (each action through Hangar's `computer_action`; the GA tool's
 * batches run action by action). With `hangar serve` running and the package built:
 *   OPENAI_API_KEY=… npx tsx examples/openai-agents-computer.ts "Open a terminal and print the date"
 */
import { Agent, computerTool, run } from "@openai/agents";
import { HangarComputer } from "hangar/client/openai-agents";

const task = process.argv[2] ?? "Take a screenshot and describe what is on the screen.";
// The screen's own size unless you pass `display`; connect() reads it, as the preview tool needs it.
const computer = await HangarComputer.connect(process.env.HANGAR_URL ?? "http://127.0.0.1:8000");

const agent = new Agent({
  name: "Desktop assistant",
  instructions: "You operate a Linux desktop through the computer tool. Be brief.",
  model: process.env.OPENAI_MODEL ?? "gpt-5.4",
  tools: [
    computerTool({
      computer,
      // The model may ask to confirm before a sensitive step: stop there rather than say yes alone.
      onSafetyCheck: async ({ pendingSafetyChecks }) => {
        for (const check of pendingSafetyChecks) console.log(`Safety check: ${check.message ?? check.code}`);
        return false;
      },
    }),
  ],
});

try {
  const result = await run(agent, task, { maxTurns: 50 });
  console.log(result.finalOutput);
} finally {
  await computer.close();
}
