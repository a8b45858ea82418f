"""An undecorated, unmanaged window at a known place showing known colours.

Usage: pattern.py X Y  — a 300x200 window at X,Y: three 100-pixel-wide vertical bands, pure red,
pure green and pure blue, with a 20-pixel white bar across the bottom.
"""
import sys

import gi

gi.require_version("Gtk", "3.0")
from gi.repository import Gtk  # noqa: E402

x, y = int(sys.argv[1]), int(sys.argv[2])
window = Gtk.Window(type=Gtk.WindowType.POPUP)
window.set_default_size(300, 200)
window.move(x, y)
area = Gtk.DrawingArea()


def draw(_widget, cr):
    for i, (r, g, b) in enumerate([(1, 0, 0), (0, 1, 0), (0, 0, 1)]):
        cr.set_source_rgb(r, g, b)
        cr.rectangle(i * 100, 0, 100, 180)
        cr.fill()
    cr.set_source_rgb(1, 1, 1)
    cr.rectangle(0, 180, 300, 20)
    cr.fill()


area.connect("draw", draw)
window.add(area)
window.show_all()
Gtk.main()
