"""A GTK window that is one big button; each click appends "clicked" to a file.

Usage: button.py OUT TITLE
"""
import sys

import gi

gi.require_version("Gtk", "3.0")
from gi.repository import Gtk  # noqa: E402

out_path, title = sys.argv[1], sys.argv[2]
window = Gtk.Window(title=title)
window.set_default_size(300, 120)
button = Gtk.Button(label="Press me")


def clicked(_button):
    with open(out_path, "a", encoding="utf-8") as out:
        out.write("clicked\n")


button.connect("clicked", clicked)
window.add(button)
window.connect("destroy", Gtk.main_quit)
window.show_all()
Gtk.main()
