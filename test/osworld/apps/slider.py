"""A GTK window with a slider (0 to 100, at 40, steps of 5), for the val: attributes of the XML."""
import gi

gi.require_version("Gtk", "3.0")
from gi.repository import Gtk  # noqa: E402

window = Gtk.Window(title="Osworld Slider")
window.set_default_size(300, 80)
scale = Gtk.Scale.new_with_range(Gtk.Orientation.HORIZONTAL, 0, 100, 5)
scale.set_value(40)
scale.get_accessible().set_name("Volume")
window.add(scale)
window.connect("destroy", Gtk.main_quit)
window.show_all()
Gtk.main()
