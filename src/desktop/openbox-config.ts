/**
 * The window manager configuration of Hangar's virtual desktop: openbox with one desktop and no
 * bindings that change what an agent sees behind its back. openbox's own default has four desktops
 * and switches between them on a wheel turn over the bare desktop, after which every window is gone
 * from screenshots. Kept: clicking to focus, moving and resizing by the frame, the title bar buttons.
 */
import { chmod, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { CommandUser } from "../os/command-user.js";
import { makeOwnedTempDir } from "../os/owned-temp-dir.js";

const FRAME_BINDINGS = `
    <context name="Frame">
      <mousebind button="A-Left" action="Press"><action name="Focus"/><action name="Raise"/></mousebind>
      <mousebind button="A-Left" action="Drag"><action name="Move"/></mousebind>
    </context>
    <context name="Titlebar">
      <mousebind button="Left" action="Press"><action name="Focus"/><action name="Raise"/></mousebind>
      <mousebind button="Left" action="Drag"><action name="Move"/></mousebind>
      <mousebind button="Left" action="DoubleClick"><action name="ToggleMaximize"/></mousebind>
    </context>
    <context name="Client">
      <mousebind button="Left" action="Press"><action name="Focus"/><action name="Raise"/></mousebind>
      <mousebind button="Middle" action="Press"><action name="Focus"/><action name="Raise"/></mousebind>
      <mousebind button="Right" action="Press"><action name="Focus"/><action name="Raise"/></mousebind>
    </context>
    ${["Top", "Bottom", "Left", "Right", "TLCorner", "TRCorner", "BLCorner", "BRCorner"]
      .map(
        (edge) => `<context name="${edge}">
      <mousebind button="Left" action="Press"><action name="Focus"/><action name="Raise"/></mousebind>
      <mousebind button="Left" action="Drag"><action name="Resize"/></mousebind>
    </context>`,
      )
      .join("\n    ")}
    <context name="Close">
      <mousebind button="Left" action="Click"><action name="Close"/></mousebind>
    </context>
    <context name="Iconify">
      <mousebind button="Left" action="Click"><action name="Iconify"/></mousebind>
    </context>
    <context name="Maximize">
      <mousebind button="Left" action="Click"><action name="ToggleMaximize"/></mousebind>
    </context>`;

export const OPENBOX_RC = `<?xml version="1.0" encoding="UTF-8"?>
<openbox_config xmlns="http://openbox.org/3.4/rc">
  <focus><focusNew>yes</focusNew><followMouse>no</followMouse></focus>
  <placement><policy>Smart</policy><center>yes</center></placement>
  <theme><name>Clearlooks</name><titleLayout>NLIMC</titleLayout></theme>
  <desktops><number>1</number><firstdesk>1</firstdesk><popupTime>0</popupTime></desktops>
  <keyboard></keyboard>
  <mouse>
    <dragThreshold>1</dragThreshold>
    <doubleClickTime>500</doubleClickTime>${FRAME_BINDINGS}
  </mouse>
  <menu></menu>
  <applications></applications>
</openbox_config>
`;

/**
 * Writes the configuration to a private directory; `remove()` deletes it, and so does the next
 * desktop's start when this process was killed (owned-temp-dir.ts).
 */
export async function writeOpenboxConfig(
  user?: CommandUser,
): Promise<{ file: string; remove(): Promise<void> }> {
  const dir = await makeOwnedTempDir("hangar-openbox-");
  const file = join(dir, "rc.xml");
  await writeFile(file, OPENBOX_RC, { mode: 0o644 });
  // Read by the command user's window manager: it may pass through the directory, not list it.
  if (user) await chmod(dir, 0o711);
  return { file, remove: () => rm(dir, { recursive: true, force: true }) };
}
