"""Hangar's pyautogui: the PyAutoGUI functions agents use, done by the Hangar computer server.

Every call is one POST /cmd to the server that started this Python (OSWorld's /execute and
/run_python), so typing is exact for any Unicode text and every action is in the server's
activity timeline. The server passes the way back in a private file named by
HANGAR_PYAUTOGUI_CONNECTION ({url, container_name, api_key, cafile}); no key is ever in the
arguments or environment. A function this module does not have raises AttributeError.
"""

import collections
import json
import math
import os
import ssl
import sys
import time
import urllib.error
import urllib.request

__version__ = "0.9.54+hangar"

PAUSE = 0.1
FAILSAFE = True
FAILSAFE_POINTS = [(0, 0)]
MINIMUM_DURATION = 0.1
MINIMUM_SLEEP = 0.05
DARWIN_CATCH_UP_TIME = 0.01
LOG_SCREENSHOTS = False

Point = collections.namedtuple("Point", "x y")
Size = collections.namedtuple("Size", "width height")

LEFT, MIDDLE, RIGHT, PRIMARY, SECONDARY = "left", "middle", "right", "primary", "secondary"


class PyAutoGUIException(Exception):
    """A call the server refused or could not do."""


class FailSafeException(PyAutoGUIException):
    """The pointer was in a corner of the screen with FAILSAFE on."""


class ImageNotFoundException(PyAutoGUIException):
    pass


# -- the way to the server ----------------------------------------------------------------------

_connection = None


def _load_connection():
    global _connection
    if _connection is None:
        path = os.environ.get("HANGAR_PYAUTOGUI_CONNECTION")
        if not path:
            raise PyAutoGUIException(
                "Hangar's pyautogui runs under a Hangar computer server (HANGAR_PYAUTOGUI_CONNECTION is not set)"
            )
        with open(path, encoding="utf-8") as f:
            _connection = json.load(f)
    return _connection


def _command(command, **params):
    conn = _load_connection()
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    if conn.get("api_key"):
        headers["X-API-Key"] = conn["api_key"]
        headers["X-Container-Name"] = conn.get("container_name", "")
    body = json.dumps({"command": command, "params": params}).encode("utf-8")
    request = urllib.request.Request(conn["url"] + "/cmd", data=body, headers=headers, method="POST")
    context = None
    if conn.get("cafile"):
        context = ssl.create_default_context(cafile=conn["cafile"])
        context.check_hostname = False
    try:
        with urllib.request.urlopen(request, timeout=600, context=context) as response:
            text = response.read().decode("utf-8")
    except urllib.error.HTTPError as err:
        text = err.read().decode("utf-8", "replace")
    events = [chunk[6:] for chunk in text.split("\n\n") if chunk.startswith("data: ")]
    if not events:
        raise PyAutoGUIException("%s: the server answered %r" % (command, text[:200]))
    event = json.loads(events[-1])
    if not event.get("success"):
        raise PyAutoGUIException("%s: %s" % (command, event.get("error", "failed")))
    return event.get("content")


def _pause(pause=True):
    if pause and PAUSE:
        time.sleep(PAUSE)


def _fail_safe_check():
    if FAILSAFE and tuple(position()) in _fail_safe_points():
        raise FailSafeException(
            "PyAutoGUI fail-safe triggered from mouse moving to a corner of the screen. "
            "To disable this fail-safe, set pyautogui.FAILSAFE to False."
        )


def _fail_safe_points():
    width, height = size()
    return set(FAILSAFE_POINTS) | {(0, height - 1), (width - 1, 0), (width - 1, height - 1)}


def _action(fn):
    """PyAutoGUI's decorator: the fail-safe check before, PAUSE after (`_pause=False` skips it)."""

    def wrapper(*args, **kwargs):
        pause = kwargs.pop("_pause", True)
        _fail_safe_check()
        result = fn(*args, **kwargs)
        _pause(pause)
        return result

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


# -- screen and pointer -------------------------------------------------------------------------


def size():
    got = _command("get_screen_size")["size"]
    return Size(int(got["width"]), int(got["height"]))


resolution = size


def position(x=None, y=None):
    got = _command("get_cursor_position")["position"]
    return Point(int(got["x"]) if x is None else int(x), int(got["y"]) if y is None else int(y))


def onScreen(x, y=None):
    x, y = _unpack(x, y)
    width, height = size()
    return 0 <= x < width and 0 <= y < height


def _unpack(x, y):
    if isinstance(x, str):
        raise PyAutoGUIException("locating images on the screen is not supported by Hangar's pyautogui")
    if isinstance(x, (tuple, list)):
        if len(x) == 2:
            return int(x[0]), int(x[1])
        if len(x) == 4:  # a box: its centre
            return int(x[0] + x[2] / 2), int(x[1] + x[3] / 2)
        raise PyAutoGUIException("expected an (x, y) pair, got %r" % (x,))
    return x, y


def _target(x, y):
    """The point to act on: None for either coordinate means where the pointer is."""
    x, y = _unpack(x, y)
    if x is None or y is None:
        here = position()
        x = here.x if x is None else x
        y = here.y if y is None else y
    return int(round(float(x))), int(round(float(y)))


def _button(button):
    name = {1: "left", 2: "middle", 3: "right", "1": "left", "2": "middle", "3": "right"}.get(button, button)
    name = str(name).lower()
    if name in ("primary",):
        return "left"
    if name in ("secondary",):
        return "right"
    if name not in ("left", "middle", "right"):
        raise PyAutoGUIException("button argument must be one of ('left', 'middle', 'right', 'primary', 'secondary', 1, 2, 3), not %r" % (button,))
    return name


def _glide(x, y, duration, tween=None):
    """Moves to x, y; with a duration, through points along the way as PyAutoGUI does."""
    if duration and duration >= MINIMUM_DURATION:
        start = position()
        steps = max(2, int(duration / MINIMUM_SLEEP))
        ease = tween or linear
        for i in range(1, steps + 1):
            t = ease(i / steps)
            _command("move_cursor", x=int(round(start.x + (x - start.x) * t)), y=int(round(start.y + (y - start.y) * t)))
            time.sleep(duration / steps)
    else:
        _command("move_cursor", x=x, y=y)


@_action
def moveTo(x=None, y=None, duration=0.0, tween=None, logScreenshot=False):
    x, y = _target(x, y)
    _glide(x, y, duration, tween)


@_action
def moveRel(xOffset=None, yOffset=None, duration=0.0, tween=None, logScreenshot=False):
    xOffset, yOffset = _unpack(xOffset, yOffset)
    here = position()
    _glide(here.x + int(xOffset or 0), here.y + int(yOffset or 0), duration, tween)


move = moveRel

_CLICK_COMMANDS = {("left", 1): "left_click", ("left", 2): "double_click", ("left", 3): "triple_click",
                   ("right", 1): "right_click", ("middle", 1): "middle_click"}


@_action
def click(x=None, y=None, clicks=1, interval=0.0, button=PRIMARY, duration=0.0, tween=None, logScreenshot=False):
    button = _button(button)
    x, y = _target(x, y)
    if duration:
        _glide(x, y, duration, tween)
    clicks = int(clicks)
    command = _CLICK_COMMANDS.get((button, clicks)) if not interval else None
    if command:
        _command(command, x=x, y=y)
        return
    _command("move_cursor", x=x, y=y)
    for i in range(clicks):
        _command("mouse_down", button=button)
        _command("mouse_up", button=button)
        if interval and i < clicks - 1:
            time.sleep(interval)


def leftClick(x=None, y=None, interval=0.0, duration=0.0, tween=None, logScreenshot=False, _pause=True):
    click(x, y, 1, interval, LEFT, duration, tween, _pause=_pause)


def rightClick(x=None, y=None, interval=0.0, duration=0.0, tween=None, logScreenshot=False, _pause=True):
    click(x, y, 1, interval, RIGHT, duration, tween, _pause=_pause)


def middleClick(x=None, y=None, interval=0.0, duration=0.0, tween=None, logScreenshot=False, _pause=True):
    click(x, y, 1, interval, MIDDLE, duration, tween, _pause=_pause)


def doubleClick(x=None, y=None, interval=0.0, button=LEFT, duration=0.0, tween=None, logScreenshot=False, _pause=True):
    click(x, y, 2, interval, button, duration, tween, _pause=_pause)


def tripleClick(x=None, y=None, interval=0.0, button=LEFT, duration=0.0, tween=None, logScreenshot=False, _pause=True):
    click(x, y, 3, interval, button, duration, tween, _pause=_pause)


@_action
def mouseDown(x=None, y=None, button=PRIMARY, duration=0.0, tween=None, logScreenshot=False):
    button = _button(button)
    if x is not None or y is not None:
        x, y = _target(x, y)
        _glide(x, y, duration, tween)
    _command("mouse_down", button=button)


@_action
def mouseUp(x=None, y=None, button=PRIMARY, duration=0.0, tween=None, logScreenshot=False):
    button = _button(button)
    if x is not None or y is not None:
        x, y = _target(x, y)
        _glide(x, y, duration, tween)
    _command("mouse_up", button=button)


@_action
def dragTo(x=None, y=None, duration=0.0, tween=None, button=PRIMARY, logScreenshot=False, mouseDownUp=True):
    button = _button(button)
    x, y = _target(x, y)
    if mouseDownUp:
        _command("drag_to", x=x, y=y, button=button, duration=float(duration or 0))
    else:
        _glide(x, y, duration, tween)


@_action
def dragRel(xOffset=0, yOffset=0, duration=0.0, tween=None, button=PRIMARY, logScreenshot=False, mouseDownUp=True):
    xOffset, yOffset = _unpack(xOffset, yOffset)
    here = position()
    dragTo(here.x + int(xOffset or 0), here.y + int(yOffset or 0), duration, tween, button, mouseDownUp=mouseDownUp, _pause=False)


drag = dragRel


def _scroll_at(x, y):
    if x is not None or y is not None:
        x, y = _target(x, y)
        _command("move_cursor", x=x, y=y)


@_action
def scroll(clicks, x=None, y=None, logScreenshot=False):
    """Vertical wheel notches: positive up, negative down."""
    _scroll_at(x, y)
    if int(clicks):
        _command("scroll", x=0, y=int(clicks))


vscroll = scroll


@_action
def hscroll(clicks, x=None, y=None, logScreenshot=False):
    """Horizontal wheel notches: positive right, negative left."""
    _scroll_at(x, y)
    if int(clicks):
        _command("scroll", x=int(clicks), y=0)


# -- keyboard -----------------------------------------------------------------------------------

KEYBOARD_KEYS = [
    "\t", "\n", "\r", " ", "!", '"', "#", "$", "%", "&", "'", "(", ")", "*", "+", ",", "-", ".", "/",
    "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", ":", ";", "<", "=", ">", "?", "@", "[", "\\", "]",
    "^", "_", "`", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q",
    "r", "s", "t", "u", "v", "w", "x", "y", "z", "{", "|", "}", "~", "accept", "add", "alt", "altleft",
    "altright", "apps", "backspace", "browserback", "browserfavorites", "browserforward", "browserhome",
    "browserrefresh", "browsersearch", "browserstop", "capslock", "clear", "convert", "ctrl", "ctrlleft",
    "ctrlright", "decimal", "del", "delete", "divide", "down", "end", "enter", "esc", "escape", "execute",
    "f1", "f10", "f11", "f12", "f13", "f14", "f15", "f16", "f17", "f18", "f19", "f2", "f20", "f21", "f22",
    "f23", "f24", "f3", "f4", "f5", "f6", "f7", "f8", "f9", "final", "fn", "hanguel", "hangul", "hanja",
    "help", "home", "insert", "junja", "kana", "kanji", "launchapp1", "launchapp2", "launchmail",
    "launchmediaselect", "left", "modechange", "multiply", "nexttrack", "nonconvert", "num0", "num1",
    "num2", "num3", "num4", "num5", "num6", "num7", "num8", "num9", "numlock", "pagedown", "pageup",
    "pause", "pgdn", "pgup", "playpause", "prevtrack", "print", "printscreen", "prntscrn", "prtsc",
    "prtscr", "return", "right", "scrolllock", "select", "separator", "shift", "shiftleft", "shiftright",
    "sleep", "space", "stop", "subtract", "tab", "up", "volumedown", "volumemute", "volumeup", "win",
    "winleft", "winright", "yen", "command", "option", "optionleft", "optionright",
]

# PyAutoGUI's names that Hangar spells otherwise (X keysym names or Hangar's own).
_KEY_NAMES = {
    "\t": "tab", "\n": "enter", "\r": "enter", " ": "space",
    "altleft": "alt", "altright": "alt_r", "ctrlleft": "ctrl", "ctrlright": "ctrl_r",
    "shiftleft": "shift", "shiftright": "shift_r", "winleft": "meta", "winright": "meta_r",
    "optionleft": "alt", "optionright": "alt_r", "apps": "menu", "del": "delete",
    "add": "KP_Add", "subtract": "KP_Subtract", "multiply": "KP_Multiply", "divide": "KP_Divide",
    "decimal": "KP_Decimal", "separator": "KP_Separator",
    "num0": "KP_0", "num1": "KP_1", "num2": "KP_2", "num3": "KP_3", "num4": "KP_4",
    "num5": "KP_5", "num6": "KP_6", "num7": "KP_7", "num8": "KP_8", "num9": "KP_9",
    "volumemute": "XF86AudioMute", "volumedown": "XF86AudioLowerVolume", "volumeup": "XF86AudioRaiseVolume",
    "playpause": "XF86AudioPlay", "nexttrack": "XF86AudioNext", "prevtrack": "XF86AudioPrev",
    "stop": "XF86AudioStop", "browserback": "XF86Back", "browserforward": "XF86Forward",
    "browserrefresh": "XF86Refresh", "browserhome": "XF86HomePage", "browsersearch": "XF86Search",
    "browserstop": "XF86Stop", "browserfavorites": "XF86Favorites", "launchmail": "XF86Mail",
    "launchapp1": "XF86LaunchA", "launchapp2": "XF86LaunchB", "sleep": "XF86Sleep",
    "hangul": "Hangul", "hanguel": "Hangul", "hanja": "Hangul_Hanja", "kana": "Katakana",
    "kanji": "Kanji", "convert": "Henkan", "nonconvert": "Muhenkan", "modechange": "Mode_switch",
    "clear": "Clear", "execute": "Execute", "help": "Help", "select": "Select", "yen": "yen",
}


def isValidKey(key):
    return isinstance(key, str) and key.lower() in KEYBOARD_KEYS


def _key(key):
    if not isinstance(key, str) or key == "":
        raise PyAutoGUIException("a key name must be a non-empty string, not %r" % (key,))
    if len(key) > 1:
        key = key.lower()
    return _KEY_NAMES.get(key, key)


@_action
def keyDown(key, logScreenshot=None):
    _command("key_down", key=_key(key))


@_action
def keyUp(key, logScreenshot=None):
    _command("key_up", key=_key(key))


@_action
def press(keys, presses=1, interval=0.0, logScreenshot=None):
    if isinstance(keys, str):
        keys = [keys]
    for i in range(int(presses)):
        for key in keys:
            _command("hotkey", keys=[_key(key)])
            if interval:
                time.sleep(interval)


@_action
def hotkey(*args, **kwargs):
    interval = kwargs.pop("interval", 0.0)
    kwargs.pop("logScreenshot", None)
    if kwargs:
        raise TypeError("hotkey() got unexpected keyword arguments: %s" % ", ".join(kwargs))
    keys = [k for arg in args for k in ([arg] if isinstance(arg, str) else arg)]
    if not keys:
        return
    if interval:
        for key in keys:
            _command("key_down", key=_key(key))
            time.sleep(interval)
        for key in reversed(keys):
            _command("key_up", key=_key(key))
            time.sleep(interval)
    else:
        _command("hotkey", keys=[_key(k) for k in keys])


@_action
def write(message, interval=0.0, logScreenshot=None):
    """Types `message` exactly (any Unicode); a list is a sequence of key names, as PyAutoGUI's."""
    if isinstance(message, (list, tuple)):
        for key in message:
            _command("hotkey", keys=[_key(key)])
            if interval:
                time.sleep(interval)
        return
    message = str(message)
    if not message:
        return
    if interval:
        for ch in message:
            _command("type_text", text=ch)
            time.sleep(interval)
    else:
        _command("type_text", text=message)


typewrite = write


# -- screenshots, timing ------------------------------------------------------------------------


def screenshot(imageFilename=None, region=None, allScreens=False):
    """A PIL image of the screen (Pillow needed), saved to imageFilename when given."""
    import base64

    params = {"format": "png"}
    if region is not None:
        left, top, width, height = (int(v) for v in region)
        params["region"] = {"x": left, "y": top, "width": width, "height": height}
    data = base64.b64decode(_command("screenshot", **params)["image_data"])
    try:
        from io import BytesIO

        from PIL import Image
    except ImportError:
        if imageFilename:
            with open(imageFilename, "wb") as f:
                f.write(data)
            return None
        raise PyAutoGUIException("screenshot() returns a PIL image: install Pillow (python3-pil)")
    image = Image.open(BytesIO(data))
    image.load()
    if imageFilename:
        image.save(imageFilename)
    return image


def pixel(x, y):
    return screenshot(region=(x, y, 1, 1)).getpixel((0, 0))[:3]


def sleep(seconds):
    time.sleep(seconds)


def countdown(seconds):
    for i in range(seconds, 0, -1):
        print(str(i), end=" ", flush=True)
        time.sleep(1)
    print()


# -- tweens (PyAutoGUI passes pytweening's; a move only needs t -> progress) --------------------


def linear(n):
    return n


def easeInQuad(n):
    return n * n


def easeOutQuad(n):
    return -n * (n - 2)


def easeInOutQuad(n):
    return 2 * n * n if n < 0.5 else -2 * n * n + 4 * n - 1


def easeInCubic(n):
    return n ** 3


def easeOutCubic(n):
    return (n - 1) ** 3 + 1


def easeInOutCubic(n):
    return 4 * n ** 3 if n < 0.5 else 1 - (-2 * n + 2) ** 3 / 2


def easeInQuart(n):
    return n ** 4


def easeOutQuart(n):
    return 1 - (1 - n) ** 4


def easeInOutQuart(n):
    return 8 * n ** 4 if n < 0.5 else 1 - (-2 * n + 2) ** 4 / 2


def easeInQuint(n):
    return n ** 5


def easeOutQuint(n):
    return 1 - (1 - n) ** 5


def easeInOutQuint(n):
    return 16 * n ** 5 if n < 0.5 else 1 - (-2 * n + 2) ** 5 / 2


def easeInSine(n):
    return 1 - math.cos(n * math.pi / 2)


def easeOutSine(n):
    return math.sin(n * math.pi / 2)


def easeInOutSine(n):
    return -(math.cos(math.pi * n) - 1) / 2


def easeInExpo(n):
    return 0 if n == 0 else 2 ** (10 * (n - 1))


def easeOutExpo(n):
    return 1 if n == 1 else 1 - 2 ** (-10 * n)


def easeInOutExpo(n):
    if n in (0, 1):
        return n
    return 2 ** (20 * n - 10) / 2 if n < 0.5 else (2 - 2 ** (-20 * n + 10)) / 2


def easeInCirc(n):
    return 1 - math.sqrt(1 - n * n)


def easeOutCirc(n):
    return math.sqrt(1 - (n - 1) ** 2)


def easeInOutCirc(n):
    return (1 - math.sqrt(1 - (2 * n) ** 2)) / 2 if n < 0.5 else (math.sqrt(1 - (-2 * n + 2) ** 2) + 1) / 2


def easeOutBounce(n):
    if n < 1 / 2.75:
        return 7.5625 * n * n
    if n < 2 / 2.75:
        n -= 1.5 / 2.75
        return 7.5625 * n * n + 0.75
    if n < 2.5 / 2.75:
        n -= 2.25 / 2.75
        return 7.5625 * n * n + 0.9375
    n -= 2.625 / 2.75
    return 7.5625 * n * n + 0.984375


def easeInBounce(n):
    return 1 - easeOutBounce(1 - n)


def easeInOutBounce(n):
    return easeInBounce(n * 2) / 2 if n < 0.5 else easeOutBounce(n * 2 - 1) / 2 + 0.5


def easeInElastic(n, amplitude=1, period=0.3):
    return 1 - easeOutElastic(1 - n, amplitude, period)


def easeOutElastic(n, amplitude=1, period=0.3):
    if n in (0, 1):
        return n
    s = period / 4
    return amplitude * 2 ** (-10 * n) * math.sin((n - s) * (2 * math.pi / period)) + 1


def easeInOutElastic(n, amplitude=1, period=0.5):
    n *= 2
    return easeInElastic(n, amplitude, period) / 2 if n < 1 else easeOutElastic(n - 1, amplitude, period) / 2 + 0.5


def easeInBack(n, s=1.70158):
    return n * n * ((s + 1) * n - s)


def easeOutBack(n, s=1.70158):
    n -= 1
    return n * n * ((s + 1) * n + s) + 1


def easeInOutBack(n, s=1.70158):
    n *= 2
    s *= 1.525
    if n < 1:
        return 0.5 * (n * n * ((s + 1) * n - s))
    n -= 2
    return 0.5 * (n * n * ((s + 1) * n + s) + 2)


def __getattr__(name):
    raise AttributeError(
        "module 'pyautogui' has no attribute %r: Hangar's pyautogui does not implement it "
        "(docs/osworld.md lists what it has and how to use the real PyAutoGUI instead)" % name
    )
