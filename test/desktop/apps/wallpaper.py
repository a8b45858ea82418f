"""A desktop-type window (kept below the others by the window manager) showing an image file."""
import sys

import gi

gi.require_version("Gtk", "3.0")
gi.require_version("Gdk", "3.0")
from gi.repository import Gdk, Gtk  # noqa: E402

window = Gtk.Window(title="wallpaper")
window.set_type_hint(Gdk.WindowTypeHint.DESKTOP)
window.move(0, 0)
window.add(Gtk.Image.new_from_file(sys.argv[1]))
window.show_all()
Gtk.main()
