/**
 * The host service's page: the VMs with their actions, a create form, pull and push with their
 * progress, the image cache, the storage locations, the log, and a running VM's screen through
 * `WS /vnc/{name}` with noVNC, the wall of every desktop's screen (wall.ts), and the QEMU VMs' snapshots with Restore, Fork and Delete. The token (if the service has one) stays in this tab's session storage.
 */
import RFB from "@novnc/novnc";
import { syncWall } from "./wall.js";

const STORE = "hangar-host-token";
const element = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;

interface Vm {
  name: string;
  runtime?: string;
  os?: string;
  status: string;
  cpuCount?: number;
  memorySize?: number;
  diskSize?: { allocated: number; total: number };
  ipAddress?: string | null;
  vncUrl?: string | null;
  computerServerUrl?: string | null;
  downloadProgress?: number;
  push?: { status: string; progress: number; error: string | null };
  lastError?: string | null;
  /** While hibernated: what was kept (memory, paused, disk). */
  hibernation?: string;
  network?: {
    egress: "deny" | "allow" | { allow: string[] };
    credentials: { domain: string; secret: string }[];
    caged: boolean;
  };
}

class Unauthorized extends Error {}

/** Methods a request may be sent again with, when it never reached the service (HTTP's idempotent ones). */
const IDEMPOTENT = ["GET", "HEAD", "PUT", "DELETE"];

async function api<T>(path: string, init: RequestInit = {}): Promise<T> {
  const token = sessionStorage.getItem(STORE);
  const headers: Record<string, string> = { ...(init.body ? { "content-type": "application/json" } : {}) };
  if (token) headers.authorization = `Bearer ${token}`;
  const send = () => fetch(path, { ...init, headers });
  // A browser cuts requests in flight when the machine's network changes (a container started
  // beside it adds an interface): an idempotent request is sent once more.
  const res = await send().catch(async (err: unknown) => {
    if (!IDEMPOTENT.includes((init.method ?? "GET").toUpperCase())) throw err;
    await new Promise((resolve) => setTimeout(resolve, 200));
    return send();
  });
  const body = await res.json().catch(() => ({}));
  if (res.status === 401) throw new Unauthorized(body.message);
  if (!res.ok) throw new Error(body.message ?? `HTTP ${res.status}`);
  return body as T;
}

function say(text: string, error = false) {
  const message = element("message");
  message.textContent = text;
  message.className = error ? "error" : "muted";
}

/** Runs an action, says how it went, and refreshes the page's data. */
async function act(what: string, action: () => Promise<unknown>) {
  say(`${what}…`);
  try {
    await action();
    say(`${what}: done`);
  } catch (err) {
    say(`${what}: ${(err as Error).message}`, true);
  }
  // A refresh that cannot reach the service (its restart, the machine's network changing) is left
  // to the next one, two seconds on.
  await refresh().catch(() => undefined);
}

const post = <T = unknown>(path: string, body: unknown = {}) =>
  api<T>(path, { method: "POST", body: JSON.stringify(body) });
const gb = (bytes?: number) => (bytes === undefined ? "" : `${(bytes / 1024 ** 3).toFixed(1)} GB`);

function button(label: string, onclick: () => void) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = label;
  b.onclick = onclick;
  return b;
}

function link(label: string, href: string) {
  const a = document.createElement("a");
  a.href = href;
  a.target = "_blank";
  a.rel = "noopener";
  a.textContent = label;
  return a;
}

interface Pool {
  name: string;
  runtime: string;
  template: string;
  size: number;
  ready: number;
  starting: number;
  claimed: number;
  ttl: number | null;
  lastError: string | null;
  desktops: {
    name: string;
    state: string;
    claimedBy: string | null;
    claimedAt: string | null;
    expiresAt: string | null;
  }[];
}

function poolRow(pool: Pool): HTMLTableRowElement {
  const row = document.createElement("tr");
  row.dataset.pool = pool.name;
  const name = encodeURIComponent(pool.name);
  const actions = document.createElement("span");
  actions.append(
    button("Claim", () =>
      act(`Claim from ${pool.name}`, async () => {
        const desktop = await post<{ name: string }>(`/svc/pools/${name}/claim`, {
          wait: false,
          owner: "host page",
        });
        say(`Claimed ${desktop.name}`);
      }),
    ),
    button("Resize", () => {
      const size = Number(prompt(`Desktops kept ready in ${pool.name}`, String(pool.size)));
      if (size)
        void act(`Resize ${pool.name}`, () =>
          api(`/svc/pools/${name}`, { method: "PATCH", body: JSON.stringify({ size }) }),
        );
    }),
    button("Delete", () => {
      if (confirm(`Delete pool ${pool.name} and all its desktops, claimed ones too?`)) {
        void act(`Delete pool ${pool.name}`, () => api(`/svc/pools/${name}`, { method: "DELETE" }));
      }
    }),
  );
  const starting = pool.lastError
    ? `${pool.starting} (last failure: ${pool.lastError})`
    : String(pool.starting);
  row.append(
    cell(pool.name),
    cell(pool.runtime),
    cell(pool.template),
    cell(String(pool.size)),
    cell(String(pool.ready)),
    cell(starting),
    cell(String(pool.claimed)),
    cell(pool.ttl === null ? "until released" : `${pool.ttl} s`),
    cell(actions),
  );
  return row;
}

function claimRows(pools: Pool[]): HTMLTableRowElement[] {
  const time = (iso: string | null) => (iso ? new Date(iso).toLocaleTimeString() : "—");
  return pools.flatMap((pool) =>
    pool.desktops
      .filter((d) => d.state === "claimed")
      .map((d) => {
        const row = document.createElement("tr");
        row.dataset.claim = d.name;
        row.append(
          cell(d.name),
          cell(pool.name),
          cell(d.claimedBy ?? "—"),
          cell(time(d.claimedAt)),
          cell(d.expiresAt ? time(d.expiresAt) : "when released"),
          cell(
            button("Release", () =>
              act(`Release ${d.name}`, () => post(`/svc/vms/${encodeURIComponent(d.name)}/release`)),
            ),
          ),
        );
        return row;
      }),
  );
}

function cell(content: string | Node) {
  const td = document.createElement("td");
  td.append(content);
  return td;
}

function progress(value: number, label: string) {
  const bar = document.createElement("progress");
  bar.max = 100;
  bar.value = value;
  const span = document.createElement("span");
  span.append(bar, ` ${label} ${Math.round(value)} %`);
  return span;
}

function statusOf(vm: Vm): Node {
  if (vm.status === "pulling") return progress(vm.downloadProgress ?? 0, "pulling");
  if (vm.push?.status === "pushing") return progress(vm.push.progress, "pushing");
  const span = document.createElement("span");
  span.className = vm.status === "running" ? "running" : vm.status === "hibernated" ? "asleep" : "";
  const push =
    vm.push && vm.push.status !== "pushing"
      ? `, push ${vm.push.status}${vm.push.error ? `: ${vm.push.error}` : ""}`
      : "";
  const kept = vm.hibernation ? ` (${vm.hibernation})` : "";
  span.textContent = vm.status + kept + (vm.lastError ? ` (${vm.lastError})` : "") + push;
  return span;
}

/** The desktop's egress policy in a few words (docs/egress.md); the whole list as the cell's title. */
function networkOf(vm: Vm): Node {
  const span = document.createElement("span");
  const network = vm.network;
  if (!network) return span;
  const { egress } = network;
  const allow = typeof egress === "object" ? egress.allow : [];
  span.textContent = !network.caged
    ? "open"
    : typeof egress === "string"
      ? egress
      : `allow ${allow.slice(0, 2).join(", ")}${allow.length > 2 ? ` +${allow.length - 2}` : ""}`;
  if (network.credentials.length > 0) span.textContent += `, ${network.credentials.length} credential(s)`;
  span.title = [...allow, ...network.credentials.map((c) => `${c.domain}: secret ${c.secret}`)].join("\n");
  return span;
}

function vmRow(vm: Vm): HTMLTableRowElement {
  const row = document.createElement("tr");
  row.dataset.name = vm.name;
  row.dataset.status = vm.status;
  const actions = document.createElement("span");
  const name = encodeURIComponent(vm.name);
  if (vm.status === "stopped")
    actions.append(button("Run", () => act(`Run ${vm.name}`, () => post(`/svc/vms/${name}/run`))));
  if (vm.status === "running") {
    actions.append(button("Stop", () => act(`Stop ${vm.name}`, () => post(`/svc/vms/${name}/stop`))));
    // A QEMU VM's VNC is relayed here; a container's viewer is its own noVNC page, on loopback.
    if (vm.vncUrl?.startsWith("vnc:")) actions.append(button("Screen", () => showScreen(vm)));
    else if (vm.vncUrl) actions.append(link("Viewer", vm.vncUrl));
    actions.append(
      button("Hibernate", () => act(`Hibernate ${vm.name}`, () => post(`/svc/vms/${name}/hibernate`))),
    );
  }
  if (vm.status === "hibernated") {
    actions.append(
      button("Resume", () => act(`Resume ${vm.name}`, () => post(`/svc/vms/${name}/resume`))),
      button("Stop", () => act(`Stop ${vm.name}`, () => post(`/svc/vms/${name}/stop`))),
    );
  }
  if (vm.runtime === "qemu" && (vm.status === "running" || vm.status === "stopped")) {
    actions.append(
      button("Snapshot", () => {
        const snapshot = prompt(`Name of the snapshot of ${vm.name}`);
        if (snapshot)
          void act(`Snapshot ${vm.name}`, () => post(`/svc/vms/${name}/snapshots`, { name: snapshot }));
      }),
    );
  }
  if (vm.status === "stopped") {
    actions.append(
      button("Clone", () => {
        const newName = prompt(`Name of the copy of ${vm.name}`);
        if (newName) void act(`Clone ${vm.name}`, () => post("/svc/vms/clone", { name: vm.name, newName }));
      }),
      button("Delete", () => {
        if (confirm(`Delete ${vm.name} and its disk?`)) {
          void act(`Delete ${vm.name}`, () => api(`/svc/vms/${name}`, { method: "DELETE" }));
        }
      }),
    );
  }
  row.append(
    cell(vm.name),
    cell(vm.runtime ?? ""),
    cell(vm.os ?? ""),
    cell(statusOf(vm)),
    cell(String(vm.cpuCount ?? "")),
    cell(gb(vm.memorySize)),
    cell(vm.diskSize ? `${gb(vm.diskSize.allocated)} / ${gb(vm.diskSize.total)}` : ""),
    cell(vm.ipAddress ?? ""),
    cell(networkOf(vm)),
    cell(actions),
  );
  return row;
}

interface Snapshot {
  name: string;
  vm: string;
  createdAt: string;
  memory: boolean;
  bytes: number;
}

function snapshotRow(snap: Snapshot): HTMLTableRowElement {
  const row = document.createElement("tr");
  row.dataset.snapshot = `${snap.vm}/${snap.name}`;
  const base = `/svc/vms/${encodeURIComponent(snap.vm)}`;
  const actions = document.createElement("span");
  actions.append(
    button("Restore", () => {
      if (confirm(`Put ${snap.vm} back in the state of ${snap.name}? What it has now is lost.`)) {
        void act(`Restore ${snap.vm} to ${snap.name}`, () =>
          post(`${base}/restore`, { snapshot: snap.name }),
        );
      }
    }),
    button("Fork", () => {
      const count = Number(prompt(`How many new VMs from ${snap.vm}/${snap.name}?`, "1"));
      if (count) {
        void act(`Fork ${count} from ${snap.name}`, () =>
          post(`${base}/fork`, { snapshot: snap.name, count, prefix: `${snap.vm}-${snap.name}` }),
        );
      }
    }),
    button("Delete", () => {
      if (confirm(`Delete snapshot ${snap.name} of ${snap.vm}?`)) {
        void act(`Delete snapshot ${snap.name}`, () =>
          api(`${base}/snapshots/${encodeURIComponent(snap.name)}`, { method: "DELETE" }),
        );
      }
    }),
  );
  row.append(
    cell(snap.vm),
    cell(snap.name),
    cell(snap.memory ? "whole state" : "disk only"),
    cell(`${(snap.bytes / 1024 ** 2).toFixed(0)} MB`),
    cell(new Date(snap.createdAt).toLocaleString()),
    cell(actions),
  );
  return row;
}

/** Every QEMU VM's snapshots (a VM gone meanwhile has none). */
async function snapshotsOf(vms: Vm[]): Promise<Snapshot[]> {
  const lists = await Promise.all(
    vms
      .filter((vm) => vm.runtime === "qemu")
      .map((vm) => api<Snapshot[]>(`/svc/vms/${encodeURIComponent(vm.name)}/snapshots`).catch(() => [])),
  );
  return lists.flat();
}

let screen: { name: string; rfb: RFB; closed: boolean } | undefined;

/** Closes the screen's connection unless the VNC server already did. */
function closeScreen() {
  if (screen && !screen.closed) screen.rfb.disconnect();
  screen = undefined;
}

function showScreen(vm: Vm) {
  closeScreen();
  const password = decodeURIComponent(new URL(vm.vncUrl!).password);
  const url = new URL(`/vnc/${encodeURIComponent(vm.name)}`, location.href);
  url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
  const token = sessionStorage.getItem(STORE);
  if (token) url.searchParams.set("token", token);
  const target = element("screen");
  target.replaceChildren();
  const rfb = new RFB(target, url.href, { credentials: { password } });
  rfb.scaleViewport = true;
  const shown = { name: vm.name, rfb, closed: false };
  rfb.addEventListener("disconnect", () => {
    shown.closed = true;
    if (screen === shown) element("screen-links").textContent = `${vm.name}: disconnected`;
  });
  screen = shown;
  element("screen-title").textContent = `Screen of ${vm.name}`;
  const links = element("screen-links");
  links.replaceChildren();
  if (vm.computerServerUrl) {
    const a = document.createElement("a");
    a.href = vm.computerServerUrl;
    a.target = "_blank";
    a.textContent = `Its computer server's page (${vm.computerServerUrl})`;
    links.append(a);
  } else links.textContent = "Its computer server is not reachable yet.";
  element("screen-section").hidden = false;
}

/** The pools the page shows. */
let shownPools: Pool[] = [];

async function refresh() {
  const [vms, pools, images, locations, logs] = await Promise.all([
    api<Vm[]>("/svc/vms"),
    // The last list shown stays when the service cannot be reached, rather than none.
    api<Pool[]>("/svc/pools").catch((): Pool[] => shownPools),
    api<unknown[]>(
      `/svc/images?organization=${encodeURIComponent(element<HTMLInputElement>("images-org").value)}`,
    ).catch(() => []),
    api<{ name: string; path: string; isDefault?: boolean }[]>("/svc/config/locations").catch(() => []),
    api<{ info?: string; error?: string }>("/svc/logs?lines=20").catch(
      (): { info?: string; error?: string } => ({}),
    ),
  ]);
  element("vms").replaceChildren(...vms.map(vmRow));
  syncWall(
    element("wall"),
    vms.filter((vm) => ["running", "hibernated", "stopped"].includes(vm.status)),
    {
      token: () => sessionStorage.getItem(STORE),
      showScreen: (desktop) => {
        showScreen(desktop as Vm);
        element("screen-section").scrollIntoView({ block: "nearest" });
      },
    },
  );
  // With the rows, not after the snapshots are fetched: a stopped VM's row never shows beside its screen.
  if (screen && !vms.some((vm) => vm.name === screen?.name && vm.status === "running")) {
    closeScreen();
    element("screen-section").hidden = true;
  }
  const snapshots = await snapshotsOf(vms);
  element("snapshots").replaceChildren(
    ...(snapshots.length > 0
      ? snapshots.map(snapshotRow)
      : [
          Object.assign(document.createElement("tr"), {
            innerHTML: '<td colspan="6" class="muted">none</td>',
          }),
        ]),
  );
  shownPools = pools;
  element("pools").replaceChildren(...pools.map(poolRow));
  const claims = claimRows(pools);
  element("claims").replaceChildren(
    ...(claims.length > 0
      ? claims
      : [
          Object.assign(document.createElement("tr"), {
            innerHTML: '<td colspan="6" class="muted">none</td>',
          }),
        ]),
  );
  if (vms.length === 0) say("No VMs yet: create one below, or pull an image.");
  const list = Array.isArray(images) ? images : [];
  const item = (text: string) => Object.assign(document.createElement("li"), { textContent: text });
  element("images").replaceChildren(
    ...(list.length > 0 ? list.map((image) => item(describe(image))) : [item("(empty)")]),
  );
  element("locations").replaceChildren(
    ...locations.map((l) =>
      Object.assign(document.createElement("li"), {
        textContent: `${l.name}: ${l.path}${l.isDefault ? " (default)" : ""}`,
      }),
    ),
  );
  element("logs").textContent = [logs.info, logs.error].filter(Boolean).join("\n") || "(empty)";
  const status = await api<{ vm_count: number; version: string }>("/svc/host/status");
  element("status").textContent = `version ${status.version} · ${status.vm_count} running`;
}

function describe(image: unknown): string {
  if (typeof image === "string") return image;
  const i = image as {
    repository?: string;
    imageId?: string;
    kind?: string;
    status?: string;
    progress?: string;
  };
  const state = i.status ? ` — ${i.status} ${i.progress ?? ""}`.trimEnd() : "";
  return `${i.kind ? `[${i.kind}] ` : ""}${i.repository ?? "?"}${i.imageId ? ` (${i.imageId})` : ""}${state}`;
}

function formJson(form: HTMLFormElement): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  for (const [key, value] of new FormData(form)) if (value !== "") body[key] = value;
  return body;
}

function wireForms() {
  element<HTMLFormElement>("create").onsubmit = (event) => {
    event.preventDefault();
    const body = formJson(event.target as HTMLFormElement);
    void act(`Create ${body.name}`, () =>
      post("/svc/vms", { ...body, cpu: Number(body.cpu), display: "1024x768" }),
    );
  };
  element<HTMLFormElement>("create-pool").onsubmit = (event) => {
    event.preventDefault();
    const body = formJson(event.target as HTMLFormElement);
    void act(`Create pool ${body.name}`, () =>
      post("/svc/pools", {
        ...body,
        size: Number(body.size),
        ...(body.ttl !== undefined && { ttl: Number(body.ttl) }),
      }),
    );
  };
  element<HTMLFormElement>("pull").onsubmit = (event) => {
    event.preventDefault();
    void act("Pull", () => post("/svc/pull/start", formJson(event.target as HTMLFormElement)));
  };
  element<HTMLFormElement>("push").onsubmit = (event) => {
    event.preventDefault();
    const body = formJson(event.target as HTMLFormElement);
    const tags = String(body.tags ?? "latest")
      .split(/[\s,]+/)
      .filter(Boolean);
    void act(`Push ${body.name}`, () => post("/svc/vms/push", { ...body, tags }));
  };
  element("prune").onclick = () => void act("Prune the image cache", () => post("/svc/prune"));
}

async function start() {
  try {
    await refresh();
  } catch (err) {
    if (err instanceof Unauthorized) return showLogin(sessionStorage.getItem(STORE) ? err.message : "");
    // The service could not be reached: the page tries again, as its refresh does.
    element("status").textContent =
      `Cannot reach the host service (${(err as Error).message}); trying again…`;
    setTimeout(() => void start(), 2000);
    return;
  }
  element("login").hidden = true;
  element("app").hidden = false;
  wireForms();
  setInterval(() => void refresh().catch(() => undefined), 2000);
}

function showLogin(reason: string) {
  sessionStorage.removeItem(STORE);
  element("status").textContent = "Sign in to manage this host's VMs.";
  element("login-error").textContent = reason;
  const form = element<HTMLFormElement>("login");
  form.hidden = false;
  form.onsubmit = (event) => {
    event.preventDefault();
    sessionStorage.setItem(STORE, String(new FormData(form).get("token")));
    void start();
  };
}

void start();
