/**
 * The live view: the desktop from `WS /live` drawn on a canvas, as H.264 decoded by WebCodecs
 * (live-stream.ts) where the browser can, else as JPEG frames; the agent's recent clicks drawn over
 * it, and, when the person takes control, their mouse and keyboard sent back as commands.
 */
import { api, apiJson, element, openSocket, sharePrefix } from "./api.js";
import { canDecodeH264, type StreamMessage, StreamPlayer } from "./live-stream.js";

/** The control lease as the server sends it (`control_state`). */
interface ControlState {
  held: boolean;
  by?: string;
  since?: string;
  help: { id: number; reason: string; since: string }[];
  mine: boolean;
}

interface Size {
  width: number;
  height: number;
  screenWidth: number;
  screenHeight: number;
}

const MARKER_MS = 2500;

export class LiveView {
  private socket?: WebSocket;
  private size?: Size;
  private readonly canvas = element<HTMLCanvasElement>("screen");
  private readonly overlay = element<HTMLCanvasElement>("overlay");
  private readonly state = element<HTMLElement>("live-state");
  private readonly markers: { x: number; y: number; at: number }[] = [];
  private control = false;
  /** What the person asked with the box, until the server answers it: older states do not undo it. */
  private asked?: boolean;
  private drawing = false;
  private pending?: Blob;
  /** Frames drawn so far (the tests read it). */
  frames = 0;
  /** The H.264 player; `streaming` while the server sends its packets. */
  readonly player = new StreamPlayer(
    this.canvas,
    () => this.drawn(),
    (message) => this.fallBack(message),
  );
  streaming = false;
  /** Set when H.264 failed here: JPEG frames from then on. */
  private h264Broken = false;
  private audioContext?: AudioContext;

  /** The last control state the server sent (the tests read it). */
  controlState?: ControlState;

  start() {
    const socket = openSocket(`${sharePrefix}/live`);
    socket.binaryType = "arraybuffer";
    this.socket = socket;
    socket.onopen = () => {
      this.sendSettings();
      this.state.textContent = "connected";
    };
    socket.onmessage = (event) => {
      if (typeof event.data === "string") return this.onMessage(JSON.parse(event.data));
      if (this.streaming) return this.player.packet(event.data as ArrayBuffer);
      void this.draw(new Blob([event.data as ArrayBuffer], { type: "image/jpeg" }));
    };
    socket.onclose = () => {
      this.stopStream();
      // Taking control needs the connection: the box waits for the server's control state again.
      element<HTMLInputElement>("control").disabled = true;
      this.asked = undefined;
      this.state.textContent = "disconnected; reconnecting…";
      setTimeout(() => this.start(), 2000);
    };
    element<HTMLSelectElement>("quality").onchange = () => this.sendSettings();
    const codec = element<HTMLSelectElement>("codec");
    if (!canDecodeH264()) {
      codec.value = "jpeg";
      codec.querySelector<HTMLOptionElement>('option[value="h264"]')!.disabled = true;
    }
    codec.onchange = () => this.sendSettings();
    element<HTMLInputElement>("sound").onchange = (event) => {
      // An AudioContext made in the click may play at once (browsers' autoplay rule).
      if ((event.target as HTMLInputElement).checked) {
        this.audioContext ??= new AudioContext();
        void this.audioContext.resume();
      }
      this.sendSettings();
    };
    element<HTMLInputElement>("control").onchange = (event) => {
      const on = (event.target as HTMLInputElement).checked;
      if (on) this.ask(on, { type: "control", on });
      else this.handBack();
    };
    element("handback").onclick = () => this.handBack();
    element("share").onclick = () => void this.share();
    this.listenForInput();
  }

  private handBack() {
    const note = element<HTMLInputElement>("handback-note");
    this.ask(false, { type: "control", on: false, note: note.value });
    note.value = "";
  }

  /** Sends a control request; the box shows it until the server's answer (a control or an error). */
  private ask(on: boolean, message: unknown) {
    if (this.send(message)) this.asked = on;
  }

  /** Makes a view-only link for an hour, shown with a button that revokes it. */
  private async share() {
    const link = await apiJson<{ id: string; url: string; expires: string }>("/share", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ ttl_s: 3600 }),
    });
    element<HTMLInputElement>("share-url").value = new URL(link.url, location.href).href;
    element("share-expires").textContent = new Date(link.expires).toLocaleTimeString([], {
      hourCycle: "h23",
    });
    element("share-box").hidden = false;
    element("share-revoke").onclick = async () => {
      await api(`/share/${link.id}`, { method: "DELETE" });
      element("share-box").hidden = true;
    };
  }

  private showControl(state: ControlState) {
    this.controlState = state;
    this.control = state.mine;
    element<HTMLInputElement>("control").checked = this.asked ?? state.mine;
    element<HTMLInputElement>("control").disabled = state.held && !state.mine;
    element("control-banner").hidden = !state.mine;
    document.body.classList.toggle("control-on", state.mine);
    const held = element("held-banner");
    held.hidden = !state.held || state.mine;
    if (state.held && !state.mine) {
      held.textContent = `Control is held by ${state.by} since ${new Date(state.since!).toLocaleTimeString([], { hourCycle: "h23" })}; the agent is paused.`;
    }
    const help = state.help.at(-1);
    element("help-banner").hidden = !help || state.mine;
    element("help-reason").textContent = help?.reason ?? "";
  }

  /** Shows a marker where the agent clicked (screen pixels) for a moment. */
  mark(point: { x: number; y: number }) {
    this.markers.push({ ...point, at: performance.now() });
    this.drawMarkers();
  }

  /** Whether this page asks for H.264: the person's choice, unless it failed here. */
  private wantsH264(): boolean {
    return !this.h264Broken && canDecodeH264() && element<HTMLSelectElement>("codec").value === "h264";
  }

  private sendSettings() {
    const width = Math.min(this.canvas.clientWidth * devicePixelRatio || 1280, 1920);
    const quality = Number(element<HTMLSelectElement>("quality").value);
    const codec = this.wantsH264() ? "h264" : "jpeg";
    const audio = codec === "h264" && element<HTMLInputElement>("sound").checked;
    if (codec === "jpeg") this.stopStream();
    // A video frame costs the encoder less than a JPEG costs the server: H.264 at up to 30 a second.
    const fps = codec === "h264" ? 30 : 25;
    this.send({ type: "settings", quality, width: Math.max(160, Math.round(width)), fps, codec, audio });
  }

  /** The stream could not be played here: JPEG frames from now on, and why in the status. */
  private fallBack(message: string) {
    this.h264Broken = true;
    this.stopStream();
    this.state.textContent = `H.264 unavailable (${message}); JPEG frames`;
    this.sendSettings();
  }

  private stopStream() {
    this.streaming = false;
    this.player.close();
  }

  private async startStream(message: StreamMessage) {
    // Packets from now on are the stream's (the player keeps them while it configures itself).
    this.streaming = true;
    try {
      await this.player.configure(
        message,
        element<HTMLInputElement>("sound").checked ? this.audioContext : undefined,
      );
    } catch (err) {
      return this.fallBack((err as Error).message);
    }
    this.setSize({
      width: message.video.width,
      height: message.video.height,
      screenWidth: message.screenWidth,
      screenHeight: message.screenHeight,
    });
  }

  private setSize(size: Size) {
    this.size = size;
    this.canvas.width = this.overlay.width = size.width;
    this.canvas.height = this.overlay.height = size.height;
  }

  private drawn() {
    this.frames++;
    const codec = this.streaming ? "H.264" : "JPEG";
    this.state.textContent = `live, ${this.size?.screenWidth}x${this.size?.screenHeight}, ${codec}`;
  }

  private send(message: unknown): boolean {
    if (this.socket?.readyState !== WebSocket.OPEN) return false;
    this.socket.send(JSON.stringify(message));
    return true;
  }

  private onMessage(message: { type: string; [key: string]: unknown }) {
    if (message.type === "size") {
      this.setSize(message as unknown as Size);
    } else if (message.type === "stream") {
      void this.startStream(message as unknown as StreamMessage);
    } else if (message.type === "stream_end") {
      this.stopStream();
      this.state.textContent = `${String(message.error)}; JPEG frames`;
    } else if (message.type === "control_state") {
      this.showControl(message as unknown as ControlState);
    } else if (message.type === "control") {
      this.asked = undefined;
      if (this.controlState) this.showControl({ ...this.controlState, mine: Boolean(message.on) });
    } else if (message.type === "error") {
      if (this.asked !== undefined) {
        this.asked = undefined;
        if (this.controlState) this.showControl(this.controlState);
      }
      this.state.textContent = String(message.error);
    }
  }

  /** Draws a frame; one that arrives while another is being decoded waits, and only the newest does. */
  private async draw(blob: Blob) {
    if (this.drawing) {
      this.pending = blob;
      return;
    }
    this.drawing = true;
    try {
      const bitmap = await createImageBitmap(blob);
      if (!this.streaming) {
        this.canvas.getContext("2d")!.drawImage(bitmap, 0, 0, this.canvas.width, this.canvas.height);
        this.drawn();
      }
      bitmap.close();
    } catch {
      // Not a picture: a packet of a stream that has just ended.
    } finally {
      this.drawing = false;
    }
    const next = this.pending;
    this.pending = undefined;
    if (next) await this.draw(next);
  }

  private drawMarkers() {
    const ctx = this.overlay.getContext("2d")!;
    ctx.clearRect(0, 0, this.overlay.width, this.overlay.height);
    const now = performance.now();
    while (this.markers.length > 0 && now - this.markers[0].at > MARKER_MS) this.markers.shift();
    if (!this.size) return;
    const scale = this.size.width / this.size.screenWidth;
    for (const marker of this.markers) {
      ctx.globalAlpha = 1 - (now - marker.at) / MARKER_MS;
      ctx.strokeStyle = "#e53935";
      ctx.lineWidth = 3;
      ctx.beginPath();
      ctx.arc(marker.x * scale, marker.y * scale, 10, 0, Math.PI * 2);
      ctx.stroke();
    }
    if (this.markers.length > 0) requestAnimationFrame(() => this.drawMarkers());
  }

  /** Screen pixels of a mouse event on the canvas. */
  private screenPoint(event: MouseEvent) {
    const box = this.canvas.getBoundingClientRect();
    const size = this.size ?? { screenWidth: box.width, screenHeight: box.height };
    return {
      x: Math.round(((event.clientX - box.left) / box.width) * size.screenWidth),
      y: Math.round(((event.clientY - box.top) / box.height) * size.screenHeight),
    };
  }

  private listenForInput() {
    const input = (command: string, params: Record<string, unknown>) => {
      if (this.control) this.send({ type: "input", command, params });
    };
    this.canvas.onclick = (event) => {
      this.canvas.focus();
      input("left_click", this.screenPoint(event));
    };
    this.canvas.oncontextmenu = (event) => {
      if (!this.control) return;
      event.preventDefault();
      input("right_click", this.screenPoint(event));
    };
    this.canvas.onwheel = (event) => {
      if (!this.control) return;
      event.preventDefault();
      input("scroll", { x: Math.sign(event.deltaX), y: Math.sign(event.deltaY) });
    };
    this.canvas.onkeydown = (event) => {
      if (!this.control) return;
      event.preventDefault();
      if (event.key.length === 1 && !event.ctrlKey && !event.altKey && !event.metaKey) {
        input("type_text", { text: event.key });
      } else if (!["Control", "Alt", "Shift", "Meta"].includes(event.key)) {
        const keys = [
          event.ctrlKey && "ctrl",
          event.altKey && "alt",
          event.metaKey && "win",
          event.key.toLowerCase(),
        ];
        const named = keys.filter((key): key is string => Boolean(key)).map((key) => KEY_NAMES[key] ?? key);
        input(
          named.length > 1 ? "hotkey" : "press_key",
          named.length > 1 ? { keys: named } : { key: named[0] },
        );
      }
    };
  }
}

/** Browser key names that differ from the server's. */
const KEY_NAMES: Record<string, string> = {
  arrowleft: "left",
  arrowright: "right",
  arrowup: "up",
  arrowdown: "down",
  escape: "esc",
  " ": "space",
};
