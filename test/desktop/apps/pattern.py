"""An undecorated, unmanaged window at a known place showing known colours.

Usage: pattern.py X Y  — a 300x200 window at X,Y: three 100-pixel-wide vertical bands, pure red,
pure green and pure blue, with a 20-pixel white bar across the bottom. Drawn with CSS, so it
needs only python3-gi and GTK 3.
"""
import sys

import gi

gi.require_version("Gtk", "3.0")
gi.require_version("Gdk", "3.0")
from gi.repository import Gdk, Gtk  # noqa: E402

x, y = int(sys.argv[1]), int(sys.argv[2])
css = Gtk.CssProvider()
css.load_from_data(
    b"""
    #red { background-color: #ff0000; }
    #green { background-color: #00ff00; }
    #blue { background-color: #0000ff; }
    #white { background-color: #ffffff; }
    """
)
Gtk.StyleContext.add_provider_for_screen(
    Gdk.Screen.get_default(), css, Gtk.STYLE_PROVIDER_PRIORITY_APPLICATION
)


def block(name, width, height):
    box = Gtk.Box()
    box.set_name(name)
    box.set_size_request(width, height)
    return box


window = Gtk.Window(type=Gtk.WindowType.POPUP)
window.move(x, y)
column = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=0)
bands = Gtk.Box(orientation=Gtk.Orientation.HORIZONTAL, spacing=0)
for name in ("red", "green", "blue"):
    bands.pack_start(block(name, 100, 180), False, False, 0)
column.pack_start(bands, False, False, 0)
column.pack_start(block("white", 300, 20), False, False, 0)
window.add(column)
window.show_all()
Gtk.main()
