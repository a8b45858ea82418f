/** The QEMU command line of one VM, built from its config and the run's choices (no side effects). */
import { join } from "node:path";
import type { Accelerator } from "./accel.js";
import { qemuValue } from "./escape.js";
import type { Firmware } from "./firmware.js";
import type { VmConfig } from "./vm-config.js";
import { DISK_FILE, NVRAM_FILE, PID_FILE, SERIAL_LOG } from "./vm-config.js";

export interface SharedDirectory {
  hostPath: string;
  tag: string;
  readOnly: boolean;
}

export interface QemuLaunch {
  name: string;
  dir: string;
  config: VmConfig;
  accelerator: Accelerator;
  firmware: Firmware | null;
  qmpSocket: string;
  /** The VM's own loopback address; forwarded ports listen on it. */
  ipAddress: string;
  /** Guest port → host port. */
  forwardedPorts: Record<string, number>;
  /** VNC on loopback (a password is set over QMP before anyone can connect), or none. */
  vnc: boolean;
  /** The VNC port to try first (a resumed VM's own); the first free one from 5900 at `ipAddress` otherwise. */
  vncPort?: number;
  sharedDirectories: SharedDirectory[];
  display: { width: number; height: number };
  /**
   * Where the guest's RAM lives: a file shared with QEMU (a snapshot copies it), a snapshot's RAM
   * file mapped privately (a restore or a fork: pages are shared until written), or anonymous
   * memory (null).
   */
  ram: { path: string; shared: boolean } | null;
  /** A new id at every launch, and the host's clock then: the guest reads both from fw_cfg. */
  bootId: string;
  clock: number;
  /** Wait for the state of a snapshot (`-incoming defer`) instead of booting. */
  incoming: boolean;
  /** More options of the user-mode network (`restrict=on`, `guestfwd=…`: the egress cage). */
  netdev?: string[];
  /** More fw_cfg items the guest reads (the egress cage's gate and CA, under opt/hangar/). */
  fwCfg?: FwCfgItem[];
  /** Where the pid file and the serial log go (default: `dir`). */
  runDir?: string;
  /** Stay paused once a state is loaded (`-S`) and in the foreground (no `-daemonize`). */
  held?: boolean;
}

/** An fw_cfg item: a short string, or a file's content. */
export type FwCfgItem = { name: string; string: string } | { name: string; file: string };

export function buildQemuArgs(launch: QemuLaunch): string[] {
  const { config } = launch;
  const memoryMb = Math.max(16, Math.round((config.memorySize ?? 1024 ** 3) / 1024 ** 2));
  // The RAM is a named backend in every launch, so a snapshot's state fits any later launch.
  const ram = launch.ram
    ? `memory-backend-file,id=ram0,size=${memoryMb}M,mem-path=${qemuValue(launch.ram.path)},share=${launch.ram.shared ? "on" : "off"}`
    : `memory-backend-ram,id=ram0,size=${memoryMb}M`;
  const args = [
    "-name",
    `${qemuValue(launch.name)},process=hangar-vm`,
    "-nodefaults",
    "-machine",
    `q35,accel=${launch.accelerator},memory-backend=ram0`,
    "-cpu",
    launch.accelerator === "kvm" ? "host" : "max",
    "-smp",
    String(Math.max(1, config.cpuCount ?? 1)),
    "-m",
    String(memoryMb),
    "-object",
    ram,
  ];
  if (config.kernel) {
    args.push("-kernel", config.kernel);
    if (config.initrd) args.push("-initrd", config.initrd);
    if (config.kernelCmdline) args.push("-append", config.kernelCmdline);
  } else if (launch.firmware) {
    args.push(
      "-drive",
      `if=pflash,format=raw,unit=0,readonly=on,file=${qemuValue(launch.firmware.code)}`,
      "-drive",
      `if=pflash,format=raw,unit=1,file=${qemuValue(join(launch.dir, NVRAM_FILE))}`,
    );
  }
  const format = config.diskFormat ?? "raw";
  args.push(
    "-drive",
    `file=${qemuValue(join(launch.dir, DISK_FILE))},format=${format},if=virtio,discard=unmap`,
  );

  const forwards = Object.entries(launch.forwardedPorts).map(
    ([guest, host]) => `hostfwd=tcp:${launch.ipAddress}:${host}-:${guest}`,
  );
  args.push(
    "-netdev",
    ["user", "id=net0", ...forwards, ...(launch.netdev ?? [])].join(","),
    "-device",
    `virtio-net-pci,netdev=net0${config.macAddress ? `,mac=${config.macAddress}` : ""}`,
    "-device",
    `VGA,edid=on,xres=${launch.display.width},yres=${launch.display.height},vgamem_mb=${videoMemoryMb(launch.display)}`,
    "-device",
    "qemu-xhci",
    "-device",
    "usb-tablet",
  );
  launch.sharedDirectories.forEach((share, index) => {
    args.push(
      "-fsdev",
      `local,id=share${index},path=${qemuValue(share.hostPath)},security_model=none${share.readOnly ? ",readonly=on" : ""}`,
      "-device",
      `virtio-9p-pci,fsdev=share${index},mount_tag=${share.tag}`,
    );
  });
  const display = launch.vncPort && launch.vncPort >= 5900 ? launch.vncPort - 5900 : 0;
  // On the VM's own loopback address, as its forwarded ports: 5900 there is the VM's alone, so a
  // resumed VM gets it back whatever other VMs started while it slept.
  if (launch.vnc) args.push("-vnc", `${launch.ipAddress}:${display},to=4000,password=on`);
  else args.push("-display", "none");
  args.push(
    "-fw_cfg",
    `name=opt/hangar/boot-id,string=${launch.bootId}`,
    "-fw_cfg",
    `name=opt/hangar/clock,string=${launch.clock}`,
  );
  for (const item of launch.fwCfg ?? []) {
    const value = "file" in item ? `file=${qemuValue(item.file)}` : `string=${qemuValue(item.string)}`;
    args.push("-fw_cfg", `name=${item.name},${value}`);
  }
  if (launch.incoming) args.push("-incoming", "defer");
  const runDir = launch.runDir ?? launch.dir;
  args.push(
    "-serial",
    `file:${qemuValue(join(runDir, SERIAL_LOG))}`,
    "-qmp",
    `unix:${qemuValue(launch.qmpSocket)},server=on,wait=off`,
    "-pidfile",
    join(runDir, PID_FILE),
  );
  args.push(...(launch.held ? ["-S"] : ["-daemonize"]));
  return args;
}

/** Enough video memory for the display at 32 bits per pixel, twice over: a power of two, 16–256 MiB. */
function videoMemoryMb({ width, height }: { width: number; height: number }): number {
  const needed = (width * height * 4 * 2) / 1024 ** 2;
  let mb = 16;
  while (mb < needed && mb < 256) mb *= 2;
  return mb;
}
