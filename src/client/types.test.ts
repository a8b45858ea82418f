/**
 * The client's result types say what clients receive: the JSON of the results, where the server's
 * bytes (`Bytes`) are base64 text (or a `data:` URL). Checked by the type checker (`npm run
 * typecheck`), which fails on a mismatch; the values below are what a reply would hold.
 */
import { describe, expectTypeOf, it } from "vitest";
import type { CommandResult } from "./types.js";

describe("CommandResult", () => {
  it("has bytes as strings, as they arrive", () => {
    expectTypeOf<CommandResult<"read_bytes">["content_b64"]>().toEqualTypeOf<string>();
    expectTypeOf<CommandResult<"screenshot">["image_data"]>().toEqualTypeOf<string>();
    expectTypeOf<CommandResult<"browser_screenshot">["screenshot"]>().toEqualTypeOf<string>();
    type OpenaiOutput = Extract<CommandResult<"computer_action">, { vocabulary: "openai" }>["tool_result"];
    expectTypeOf<NonNullable<OpenaiOutput["output"]>["image_url"]>().toEqualTypeOf<string>();
  });

  it("keeps the other fields' types", () => {
    expectTypeOf<CommandResult<"screenshot">["width"]>().toEqualTypeOf<number>();
    expectTypeOf<CommandResult<"to_screen_coordinates">["coordinates"]>().toEqualTypeOf<[number, number]>();
    expectTypeOf<CommandResult<"run_command">["return_code"]>().toEqualTypeOf<number>();
  });
});
