/** A desktop's record as the VM service answers it: lume's keys, Hangar's, its runtime, its readiness, and `push` once pushed. */

import type { PushState } from "../images/vm-activity.js";
import type { Readiness } from "./readiness.js";
import type { RuntimeRecord } from "./runtime.js";

export type DesktopRecord = RuntimeRecord & Readiness & { push?: PushState };
