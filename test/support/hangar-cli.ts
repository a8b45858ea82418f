/** Runs the `hangar` command line from the sources (tests start it with `node --import tsx`). */
import { main } from "../../src/cli/main.js";

await main();
