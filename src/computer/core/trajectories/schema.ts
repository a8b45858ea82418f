/**
 * The trajectory file format, version 1 (docs/trajectories.md): `steps.jsonl` holds one JSON object
 * a line, a `start` line, one `step` line per command in the order they finished, and an `end` line
 * when the trajectory was closed (none after a crash). Screenshots are files beside it, named by the
 * steps that refer to them. Readers skip a last line cut short by a crash.
 */
import { z } from "zod";

export const TRAJECTORY_FORMAT = "hangar.trajectory";
export const TRAJECTORY_VERSION = 1;

const point = z.object({ x: z.number(), y: z.number() });

/** A screenshot an agent was sent: its file (relative to the trajectory) and how it maps to the screen. */
export const screenshotRef = z.object({
  file: z.string().describe("path relative to the trajectory's directory, e.g. screenshots/12.png"),
  width: z.number().int(),
  height: z.number().int(),
  scale: z.number().describe("image pixels per screen pixel"),
  origin: point.describe("where the image's top-left corner is on the screen"),
});

export const startLine = z.object({
  type: z.literal("start"),
  format: z.literal(TRAJECTORY_FORMAT),
  version: z.literal(TRAJECTORY_VERSION),
  id: z.string(),
  name: z.string().optional().describe("what the session was for, as given to start_trajectory"),
  started: z.string().describe("ISO 8601"),
  server: z.object({ version: z.string() }),
  /** The screenshot agents had last been sent when the trajectory started, if any. */
  seen: screenshotRef.optional(),
});

export const stepLine = z.object({
  type: z.literal("step"),
  /** 1, 2, … in this trajectory. */
  step: z.number().int().min(1),
  time: z.string().describe("ISO 8601, when the command finished"),
  t_ms: z.number().describe("milliseconds from the trajectory's start to when the command finished"),
  client: z
    .string()
    .describe("the transport: http, ws, mcp, batch (a step of batch or computer_action), live"),
  actor: z.enum(["agent", "person"]).describe("person: input from the console's take control"),
  command: z.string(),
  params: z.unknown().describe("as given, secrets redacted and long text cut (as the activity timeline)"),
  ms: z.number().describe("how long it ran"),
  success: z.boolean(),
  code: z.string().optional(),
  error: z.string().optional(),
  point: point.optional().describe("where a click, move or drag ended, in screen pixels"),
  seen: screenshotRef.optional().describe("the screenshot the agent had last been sent before this step"),
  screenshot: screenshotRef.optional().describe("the screenshot this step sent to the agent"),
});

export const endLine = z.object({
  type: z.literal("end"),
  ended: z.string().describe("ISO 8601"),
  steps: z.number().int(),
  reason: z.enum(["stopped", "rotated", "server stopped"]),
  continued_in: z.string().optional().describe("the trajectory that goes on after a rotation"),
});

export const trajectoryLine = z.discriminatedUnion("type", [startLine, stepLine, endLine]);
export type TrajectoryLine = z.infer<typeof trajectoryLine>;
export type StepLine = z.infer<typeof stepLine>;
export type StartLine = z.infer<typeof startLine>;
export type EndLine = z.infer<typeof endLine>;
export type ScreenshotRef = z.infer<typeof screenshotRef>;

/** The JSON Schema of one line (served at `GET /trajectories/schema.json`). */
export function trajectoryJsonSchema() {
  return z.toJSONSchema(trajectoryLine, { io: "input", unrepresentable: "any" });
}
