/**
 * The wall: every desktop at a glance. A running desktop's tile shows its screen live and small
 * through `WS /wall/{name}` (the host relays the desktop's JPEG frames, sent only when its screen
 * changed, scaled on the desktop to the tile's width); a click opens its console (its computer
 * server's page), or the VNC screen below for a QEMU VM whose computer server does not answer. A hibernated desktop is shown
 * asleep and a stopped one dark: neither is connected to.
 */

export interface WallDesktop {
  name: string;
  runtime?: string;
  status: string;
  ready?: boolean;
  hibernation?: string;
  computerServerUrl?: string | null;
  vncUrl?: string | null;
}

export interface WallOptions {
  /** The host's token, for the sockets' `?token=` (a browser cannot give a WebSocket headers). */
  token(): string | null;
  /** Shows a QEMU VM's VNC screen on the page (its tile's click when it has no computer server). */
  showScreen(desktop: WallDesktop): void;
}

/** Pictures a second asked of each tile: enough to follow an agent, cheap for 16 tiles. */
const TILE_FPS = 4;

interface Tile {
  root: HTMLAnchorElement;
  canvas: HTMLCanvasElement;
  caption: HTMLElement;
  note: HTMLElement;
  desktop: WallDesktop;
  socket?: WebSocket;
  /** Why the last socket ended, shown until the next picture. */
  ended?: string;
}

const tiles = new Map<string, Tile>();

/**
 * What the tile shows: `live` (its computer server answers), `vnc` (a QEMU VM whose computer server
 * does not answer: its VNC screen is a click away), `starting`, `hibernated`, `stopped`.
 */
function stateOf(desktop: WallDesktop): string {
  if (desktop.status === "hibernated") return "hibernated";
  if (desktop.status !== "running") return "stopped";
  if (desktop.computerServerUrl && desktop.ready !== false) return "live";
  return desktop.vncUrl?.startsWith("vnc:") ? "vnc" : "starting";
}

/** Brings the wall in line with the records: new tiles, gone ones removed, sockets opened or closed. */
export function syncWall(container: HTMLElement, desktops: WallDesktop[], options: WallOptions) {
  const names = new Set(desktops.map((d) => d.name));
  for (const [name, tile] of tiles) {
    if (names.has(name)) continue;
    disconnect(tile);
    tiles.delete(name);
  }
  const ordered = desktops.map((desktop) => {
    let tile = tiles.get(desktop.name);
    if (!tile) {
      tile = makeTile(desktop, options);
      tiles.set(desktop.name, tile);
    }
    return tile;
  });
  // Only moved when the order changed, so that a tile being clicked stays put.
  const current = [...container.children];
  if (ordered.length !== current.length || ordered.some((tile, i) => tile.root !== current[i])) {
    container.replaceChildren(...ordered.map((tile) => tile.root));
  }
  // In place, so that a new tile's socket asks for pictures as wide as the tile.
  for (const [i, tile] of ordered.entries()) update(tile, desktops[i], options);
  if (desktops.length === 0) {
    container.replaceChildren(
      Object.assign(document.createElement("p"), { className: "muted", textContent: "No desktops yet." }),
    );
  }
}

function makeTile(desktop: WallDesktop, options: WallOptions): Tile {
  const root = document.createElement("a");
  root.className = "tile";
  root.dataset.name = desktop.name;
  const canvas = document.createElement("canvas");
  // 16:10 until the first picture gives the screen's shape.
  canvas.width = 320;
  canvas.height = 200;
  const note = document.createElement("span");
  note.className = "tile-note";
  const screen = document.createElement("div");
  screen.className = "tile-screen";
  screen.append(canvas, note);
  const caption = document.createElement("span");
  caption.className = "tile-caption";
  root.append(screen, caption);
  const tile: Tile = { root, canvas, caption, note, desktop };
  root.addEventListener("click", (event) => {
    // A QEMU VM without a computer server: its VNC screen on this page.
    if (stateOf(tile.desktop) !== "vnc") return;
    event.preventDefault();
    options.showScreen(tile.desktop);
  });
  return tile;
}

function update(tile: Tile, desktop: WallDesktop, options: WallOptions) {
  tile.desktop = desktop;
  const state = stateOf(desktop);
  const { root } = tile;
  root.dataset.state = state;
  root.dataset.status = desktop.status;
  if (desktop.computerServerUrl && state !== "stopped" && state !== "vnc") {
    root.href = desktop.computerServerUrl;
    root.target = "_blank";
    root.rel = "noopener";
    root.title = `${desktop.name}: open its console${state === "hibernated" ? " (wakes it)" : ""}`;
  } else {
    root.removeAttribute("href");
    root.title = state === "vnc" ? `${desktop.name}: show its screen below` : desktop.name;
  }
  const kept = desktop.hibernation ? ` (${desktop.hibernation})` : "";
  tile.caption.replaceChildren(
    Object.assign(document.createElement("b"), { textContent: desktop.name }),
    ` ${desktop.runtime ?? ""} · `,
    Object.assign(document.createElement("span"), {
      className: `tile-status ${state}`,
      textContent: desktop.status + kept,
    }),
  );
  if (state === "live") connect(tile, options);
  else disconnect(tile);
  // A stopped desktop's last picture is gone with it; a hibernated one's stays, dimmed.
  if (state === "stopped")
    tile.canvas.getContext("2d")?.clearRect(0, 0, tile.canvas.width, tile.canvas.height);
  const notes: Record<string, string> = {
    hibernated: "hibernated",
    stopped: "stopped",
    starting: "starting…",
    vnc: "no computer server: click for its screen",
  };
  tile.note.textContent = state === "live" ? (tile.ended ?? "") : notes[state];
  if (state !== "live") tile.ended = undefined;
}

function connect(tile: Tile, options: WallOptions) {
  if (tile.socket) return;
  const url = new URL(`/wall/${encodeURIComponent(tile.desktop.name)}`, location.href);
  url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
  // Pictures as wide as the tile's pixels, in steps, so that the desktop scales once.
  const pixels = Math.ceil((tile.root.clientWidth || 320) * devicePixelRatio);
  url.searchParams.set("width", String(Math.min(960, Math.max(160, Math.ceil(pixels / 80) * 80))));
  url.searchParams.set("fps", String(TILE_FPS));
  const token = options.token();
  if (token) url.searchParams.set("token", token);
  const socket = new WebSocket(url);
  socket.binaryType = "blob";
  tile.socket = socket;
  // One picture drawn at a time; a newer one that came meanwhile replaces any waiting.
  let drawing = false;
  let waiting: Blob | undefined;
  const draw = async (jpeg: Blob) => {
    drawing = true;
    try {
      const picture = await createImageBitmap(jpeg);
      if (tile.canvas.width !== picture.width || tile.canvas.height !== picture.height) {
        tile.canvas.width = picture.width;
        tile.canvas.height = picture.height;
      }
      tile.canvas.getContext("2d")?.drawImage(picture, 0, 0);
      picture.close();
      tile.root.dataset.frames = String(Number(tile.root.dataset.frames ?? 0) + 1);
      tile.ended = undefined;
      tile.note.textContent = "";
    } catch {
      // A picture that does not decode: the next one will.
    }
    drawing = false;
    const next = waiting;
    waiting = undefined;
    if (next) void draw(next);
  };
  socket.onmessage = (event) => {
    if (event.data instanceof Blob) {
      if (drawing) waiting = event.data;
      else void draw(event.data);
      return;
    }
    const message = JSON.parse(String(event.data)) as { type?: string; error?: string };
    if (message.type === "error" && message.error) tile.note.textContent = message.error;
  };
  socket.onclose = (event) => {
    if (tile.socket !== socket) return;
    tile.socket = undefined;
    // Said on the tile; the next refresh connects again while the desktop still runs.
    tile.ended = event.reason || "disconnected";
    tile.note.textContent = tile.ended;
  };
}

function disconnect(tile: Tile) {
  const socket = tile.socket;
  tile.socket = undefined;
  socket?.close();
}
