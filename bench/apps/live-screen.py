"""A full-screen window for the live view benchmark (bench/live.ts), drawn with GTK CSS.

Usage: live-screen.py animate — redraws the whole screen every 16 ms (a turning gradient and lines
of text that move), so that every captured frame differs everywhere.
       live-screen.py click — a plain window that swaps between black and white at each button press.
       live-screen.py repaint — a page of text lines on a flat background, drawn anew for each line
read on stdin (another colour, every line moved); "drawn" is printed once the X server has the frame.
"""
import sys

import gi

gi.require_version("Gtk", "3.0")
gi.require_version("Gdk", "3.0")
from gi.repository import Gdk, GLib, Gtk  # noqa: E402

mode = sys.argv[1]
state = {"tick": 0, "white": False}
css = Gtk.CssProvider()
Gtk.StyleContext.add_provider_for_screen(Gdk.Screen.get_default(), css, Gtk.STYLE_PROVIDER_PRIORITY_APPLICATION)
window = Gtk.Window(title="live-screen")
window.set_decorated(False)
window.set_name("screen")
label = Gtk.Label()
window.add(label)


def restyle():
    t = state["tick"]
    if mode == "click":
        colour = "#ffffff" if state["white"] else "#000000"
        css.load_from_data(f"#screen {{ background: {colour}; }}".encode())
        window.queue_draw()
        return
    if mode == "repaint":
        # A page loaded: a flat background of another colour, every line of text moved.
        red, green, blue = (40 + t * 53 % 160, 40 + t * 97 % 160, 40 + t * 31 % 160)
        css.load_from_data(
            f"""#screen {{ background: rgb({red}, {green}, {blue}); }}
            label {{ color: #ffffff; font-size: 22px; }}""".encode()
        )
        label.set_text("\n".join(f"page {t} line {row}: " + "the quick brown fox jumps over the lazy dog " * 3
                                 for row in range(t % 7, 40 + t % 7)))
        return
    css.load_from_data(
        f"""#screen {{ background-image: linear-gradient({t * 7 % 360}deg, #1d3557, #e76f51 {t % 100}%, #2a9d8f); }}
        label {{ color: #ffffff; font-size: 22px; }}""".encode()
    )
    label.set_text("\n".join(f"frame {t} line {row}: " + "the quick brown fox jumps over the lazy dog " * 3
                             for row in range(t % 7, 40 + t % 7)))


def tick():
    state["tick"] += 1
    restyle()
    return True


def press(_widget, event):
    # One press may be delivered twice (same timestamp); count it once.
    if event.type != Gdk.EventType.BUTTON_PRESS or event.time == state.get("last"):
        return
    state["last"] = event.time
    state["white"] = not state["white"]
    restyle()


def repaint_asked(source, _condition):
    if not source.readline():
        Gtk.main_quit()
        return False
    state["asked"] = True
    tick()
    return True


def drawn(_clock):
    if state.pop("asked", False):
        GLib.idle_add(report)


def report():
    # The drawing requests are sent and processed before the benchmark is told.
    Gdk.Display.get_default().sync()
    print("drawn", flush=True)
    return False


restyle()
if mode == "animate":
    GLib.timeout_add(16, tick)
elif mode == "repaint":
    window.connect("realize", lambda w: w.get_frame_clock().connect("after-paint", drawn))
    GLib.io_add_watch(sys.stdin, GLib.IO_IN | GLib.IO_HUP, repaint_asked)
else:
    window.add_events(Gdk.EventMask.BUTTON_PRESS_MASK)
    window.connect("button-press-event", press)
window.fullscreen()
window.show_all()
window.connect("destroy", Gtk.main_quit)
Gtk.main()
