/**
 * What every group of /svc routes is handed: the settings, the VMs, the pools, the images, the log,
 * the lifecycle events and egress.
 */

import type { DesktopService } from "./desktops/desktop-service.js";
import type { EgressService } from "./egress/egress-service.js";
import type { LifecycleEvents } from "./events.js";
import type { HostLog } from "./host-log.js";
import type { ImageService } from "./images/image-service.js";
import type { PoolManager } from "./pools/pool-manager.js";
import type { SettingsStore } from "./settings.js";
import type { IdleWatcher } from "./sleep/idle-watcher.js";

export interface HostServices {
  settings: SettingsStore;
  vms: DesktopService;
  pools: PoolManager;
  images: ImageService;
  log: HostLog;
  events: LifecycleEvents;
  /** Network policies, the egress proxy and its audit (docs/egress.md). */
  egress: EgressService;
  /** Desktops' idle timeouts, and the watcher that pauses them when idle (sleep/idle-watcher.ts). */
  idle: IdleWatcher;
}
