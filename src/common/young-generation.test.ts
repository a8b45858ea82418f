import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";

/**
 * Runs `script` in a fresh Node (its young generation as a program's at start) with the module
 * loaded, and returns what it printed as JSON. `newSpace()` is the young generation's size in MiB.
 */
function inFreshNode(script: string, nodeArgs: string[] = []) {
  const code = `
    import("./src/common/young-generation.ts").then(async (young) => {
      const { getHeapSpaceStatistics } = await import("node:v8");
      const newSpace = () =>
        getHeapSpaceStatistics().find((s) => s.space_name === "new_space").space_size / 1048576;
      // Short-lived objects, as a program's loading makes, surviving a few scavenges each.
      const churn = () => { let keep = []; for (let i = 0; i < 300000; i++) { keep.push({ i, s: "x" + i }); if (keep.length > 20000) keep = []; } };
      ${script}
    });`;
  const out = execFileSync(process.execPath, [...nodeArgs, "--import", "tsx", "-e", code], {
    encoding: "utf8",
    env: { ...process.env, NODE_OPTIONS: "" },
  });
  return JSON.parse(out);
}

describe("the young generation while a program loads", () => {
  it("stays at its first size while held, and grows again once released", () => {
    const { held, before, whileHeld, afterRelease } = inFreshNode(`
      young.holdYoungGeneration();
      const held = young.youngGenerationHeld();
      // tsx, loaded first, may have grown it already.
      const before = newSpace();
      churn();
      const whileHeld = newSpace();
      young.releaseYoungGeneration();
      churn();
      console.log(JSON.stringify({ held, before, whileHeld, afterRelease: newSpace() }));
    `);
    expect(held).toBe(true);
    expect(whileHeld).toBe(before);
    expect(afterRelease).toBeGreaterThan(whileHeld);
  });

  it("leaves a growth factor given to Node alone", () => {
    const { held } = inFreshNode(
      `young.holdYoungGeneration(); console.log(JSON.stringify({ held: young.youngGenerationHeld() }));`,
      ["--semi-space-growth-factor=4"],
    );
    expect(held).toBe(false);
  });
});
