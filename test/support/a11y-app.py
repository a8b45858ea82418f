"""A small GTK 3 window for the accessibility tests: a button, a text entry and a label.

Prints one line on stdout for everything a test wants to observe: `ready`, `clicked N`, `entry: TEXT`.
Run it with the system Python (it needs python3-gi and gir1.2-gtk-3.0). An optional argument N adds
a grid of N more labels (for benchmarks of bigger trees).
"""
import sys

import gi

gi.require_version("Gtk", "3.0")
from gi.repository import GLib, Gtk  # noqa: E402


def say(line):
    print(line, flush=True)


window = Gtk.Window(title="Hangar A11y Test")
window.set_default_size(360, 200)
window.move(100, 80)
box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=8)
box.set_border_width(12)
window.add(box)

entry = Gtk.Entry()
entry.get_accessible().set_name("Your name")
entry.connect("changed", lambda e: say("entry: " + e.get_text()))
box.pack_start(entry, False, False, 0)

label = Gtk.Label(label="clicks: 0")
box.pack_start(label, False, False, 0)

clicks = 0


def on_click(_button):
    global clicks
    clicks += 1
    label.set_text("clicks: %d" % clicks)
    say("clicked %d" % clicks)


button = Gtk.Button(label="Press me")
button.connect("clicked", on_click)
box.pack_start(button, False, False, 0)

extra = int(sys.argv[1]) if len(sys.argv) > 1 else 0
if extra:
    grid = Gtk.Grid()
    for i in range(extra):
        grid.attach(Gtk.Label(label="cell %d" % i), i % 20, i // 20, 1, 1)
    box.pack_start(grid, False, False, 0)

window.connect("destroy", Gtk.main_quit)
window.show_all()
GLib.timeout_add(300, lambda: say("ready") and False)
sys.stdout.flush()
Gtk.main()
