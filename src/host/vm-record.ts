/** A desktop's record as the VM service answers it: lume's keys, Hangar's, its runtime, its readiness, and `push` once pushed. */
import type { Readiness } from "./runtimes/readiness.js";
import type { RuntimeRecord } from "./runtimes/runtime.js";
import type { PushState } from "./vm-activity.js";

export type VmRecord = RuntimeRecord & Readiness & { push?: PushState };
