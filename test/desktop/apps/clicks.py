"""A GTK window that logs every button press/release and wheel notch it receives to a file.

Usage: clicks.py OUT TITLE — lines "press BUTTON X Y", "release BUTTON X Y" (window coordinates)
and "scroll DIRECTION" (up, down, left, right), one per event, as the application sees them.
Run with GDK_CORE_DEVICE_EVENTS=1 so that wheel notches arrive as discrete directions.
"""
import sys

import gi

gi.require_version("Gtk", "3.0")
gi.require_version("Gdk", "3.0")
from gi.repository import Gdk, Gtk  # noqa: E402

out_path, title = sys.argv[1], sys.argv[2]
out = open(out_path, "a", encoding="utf-8", buffering=1)
DIRECTIONS = {
    Gdk.ScrollDirection.UP: "up",
    Gdk.ScrollDirection.DOWN: "down",
    Gdk.ScrollDirection.LEFT: "left",
    Gdk.ScrollDirection.RIGHT: "right",
}


def button(_widget, event):
    if event.type == Gdk.EventType.BUTTON_PRESS:
        out.write(f"press {event.button} {int(event.x)} {int(event.y)}\n")
    elif event.type == Gdk.EventType.BUTTON_RELEASE:
        out.write(f"release {event.button} {int(event.x)} {int(event.y)}\n")
    return True


def scroll(_widget, event):
    out.write(f"scroll {DIRECTIONS.get(event.direction, 'smooth')}\n")
    return True


window = Gtk.Window(title=title)
window.set_default_size(400, 300)
window.add_events(Gdk.EventMask.BUTTON_PRESS_MASK | Gdk.EventMask.BUTTON_RELEASE_MASK | Gdk.EventMask.SCROLL_MASK)
window.connect("button-press-event", button)
window.connect("button-release-event", button)
window.connect("scroll-event", scroll)
window.connect("destroy", Gtk.main_quit)
window.show_all()
Gtk.main()
