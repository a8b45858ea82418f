"""A GTK window that logs the clicks and drags it recognises, as the toolkit sees them.

Usage: multiclick.py OUT TITLE — lines "press B", "double B", "triple B", "release B" (with the
time in ms since the press, "at MS", and where: "x X y Y") and, while a button is held, "motion X Y"
(window coordinates) with the time since the press.
"""
import sys
import time

import gi

gi.require_version("Gtk", "3.0")
gi.require_version("Gdk", "3.0")
from gi.repository import Gdk, Gtk  # noqa: E402

out_path, title = sys.argv[1], sys.argv[2]
out = open(out_path, "a", encoding="utf-8", buffering=1)
KINDS = {
    Gdk.EventType.BUTTON_PRESS: "press",
    Gdk.EventType._2BUTTON_PRESS: "double",
    Gdk.EventType._3BUTTON_PRESS: "triple",
    Gdk.EventType.BUTTON_RELEASE: "release",
}
pressed_at = [0.0]


def button(_widget, event):
    kind = KINDS.get(event.type)
    if kind == "press":
        pressed_at[0] = time.monotonic()
    if kind:
        ms = int((time.monotonic() - pressed_at[0]) * 1000)
        out.write(f"{kind} {event.button} at {ms} x {int(event.x)} y {int(event.y)}\n")
    return True


def motion(_widget, event):
    out.write(f"motion {int(event.x)} {int(event.y)} at {int((time.monotonic() - pressed_at[0]) * 1000)}\n")
    return True


window = Gtk.Window(title=title)
window.set_default_size(600, 400)
window.add_events(
    Gdk.EventMask.BUTTON_PRESS_MASK | Gdk.EventMask.BUTTON_RELEASE_MASK | Gdk.EventMask.BUTTON1_MOTION_MASK
)
window.connect("button-press-event", button)
window.connect("button-release-event", button)
window.connect("motion-notify-event", motion)
window.connect("destroy", Gtk.main_quit)
window.show_all()
Gtk.main()
