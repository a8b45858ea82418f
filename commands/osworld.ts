/**
 * Which Hangar command each of OSWorld's controller routes stands for (src/computer/transports/
 * osworld/): an adapter of a foreign protocol has to map its routes to commands, and this is the one
 * place that does. The composition root (src/computer/server.ts) hands the table to the transport,
 * which stays without command names; every call still goes through `registry.run()`. The streaming
 * control channel's actions (upstream's `CLICK`, `TYPING`, `HOTKEY`, …) are mapped here too.
 */
export const osworldCommands = {
  capture: "screenshot",
  screenSize: "get_screen_size",
  cursorPosition: "get_cursor_position",
  /** `/execute`, `/run_python`, `/run_bash_script`, and wmctrl for the window routes. */
  run: "run_command",
  startProgram: "launch",
  openTarget: "open",
  accessibilityTree: "get_accessibility_tree",
  startRecording: "start_recording",
  stopRecording: "stop_recording",
  recordingStatus: "recording_status",
  setWallpaper: "set_wallpaper",
  // The actions of the streaming control channel (`/ws/control`: OSWorld's computer_13 action space).
  moveTo: "move_cursor",
  leftClick: "left_click",
  doubleClick: "double_click",
  tripleClick: "triple_click",
  rightClick: "right_click",
  middleClick: "middle_click",
  buttonDown: "mouse_down",
  buttonUp: "mouse_up",
  dragTo: "drag_to",
  wheel: "scroll",
  typeText: "type_text",
  pressKey: "press_key",
  keyDown: "key_down",
  keyUp: "key_up",
  keyCombo: "hotkey",
} as const;
