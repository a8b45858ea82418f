"""A GTK window that is one button: each click appends "clicked N" to a file and shows the count.

Usage: button.py OUT TITLE. Nothing in it blinks: the screen changes only when the button is used.
"""
import sys

import gi

gi.require_version("Gtk", "3.0")
from gi.repository import Gtk  # noqa: E402

out_path, title = sys.argv[1], sys.argv[2]
window = Gtk.Window(title=title)
window.set_default_size(300, 120)
button = Gtk.Button(label="Press me")
clicks = 0


def clicked(_button):
    global clicks
    clicks += 1
    with open(out_path, "a", encoding="utf-8") as out:
        out.write(f"clicked {clicks}\n")
    button.set_label(f"Pressed {clicks}")


button.connect("clicked", clicked)
window.add(button)
window.connect("destroy", Gtk.main_quit)
window.show_all()
Gtk.main()
