"""A GTK window with one text entry; writes the entry's text to a file on every change."""
import sys

import gi

gi.require_version("Gtk", "3.0")
from gi.repository import Gtk  # noqa: E402

out_path, title = sys.argv[1], sys.argv[2]
# A blinking caret would change the screen twice a second.
Gtk.Settings.get_default().set_property("gtk-cursor-blink", False)
window = Gtk.Window(title=title)
window.set_default_size(500, 80)
entry = Gtk.Entry()


def changed(widget):
    with open(out_path, "w", encoding="utf-8") as out:
        out.write(widget.get_text())


entry.connect("changed", changed)
window.add(entry)
window.connect("destroy", Gtk.main_quit)
window.show_all()
entry.grab_focus()
Gtk.main()
