/**
 * The activity timeline: the entries kept so far, then each new one live from `GET /events`. A
 * click on an entry shows its parameters and the screenshot the agent had just seen, with a marker
 * where it clicked. The host's egress decisions come as entries too (`text`), between the commands. Entries are keyed by their id: a stream opened again (after a proxy or the
 * network cut it) asks only for what came after the last one shown, an entry that arrives twice is
 * shown once, and a server started anew (another `X-Activity-Series`) starts the list over.
 */
import type { ActivityEntry } from "../../src/computer/core/activity.js";
import { api, element, make, readEvents, sharePrefix } from "./api.js";

/** The timeline's entries are the server's own type (a type-only import: nothing of it is bundled). */
export type Entry = ActivityEntry;

const SHOWN = 300;

export class Timeline {
  private readonly list = element<HTMLOListElement>("timeline");
  private readonly detail = element<HTMLElement>("detail");
  private shownImage?: string;
  /** The newest entry shown: ids grow, so anything at or below it has been shown already. */
  private lastId = 0;
  /** The server's numbering of those ids (`X-Activity-Series`), once a stream has said it. */
  private series?: string | null;

  constructor(private readonly onEntry: (entry: Entry) => void) {}

  async start(): Promise<void> {
    const res = await api(`${sharePrefix}/events?since=${this.lastId}`);
    const series = res.headers.get("x-activity-series");
    if (this.series !== undefined && series !== this.series) {
      // A server started anew numbers from 1 again: what is shown belongs to the one before (whose
      // screenshots went with it), so the list starts over with everything the new one kept.
      await res.body?.cancel();
      this.series = undefined;
      this.lastId = 0;
      this.list.replaceChildren();
      return this.start();
    }
    this.series = series;
    const receive = (entry: Entry) => {
      if (entry.id <= this.lastId) return;
      this.lastId = entry.id;
      this.add(entry);
    };
    // The stream ends, or breaks with the connection: either way it is opened again.
    void readEvents(res, (data) => receive(JSON.parse(data) as Entry))
      .catch(() => undefined)
      .finally(() => setTimeout(() => void this.start().catch(() => undefined), 2000));
  }

  private add(entry: Entry) {
    const cells = [
      make("span", { className: "muted" }, [
        new Date(entry.time).toLocaleTimeString([], { hourCycle: "h23" }),
      ]),
      make("span", { className: "muted" }, [entry.transport]),
    ];
    if (entry.text === undefined) {
      cells.push(
        make("span", { className: "cmd" }, [`${entry.command} ${summary(entry)}`]),
        make("span", { className: "muted" }, [`${entry.ms} ms`]),
      );
    } else {
      // A note of the host's (an egress decision) says itself in words, across the time column.
      cells.push(make("span", { className: "cmd" }, [entry.text]));
    }
    const row = make(
      "li",
      { className: entry.success ? "" : "failed", title: entry.error ?? entry.text ?? "" },
      cells,
    );
    if (entry.text !== undefined) row.classList.add("note");
    row.dataset.id = String(entry.id);
    row.dataset.command = entry.command;
    row.onclick = () => void this.show(entry, row);
    const atBottom = this.list.scrollTop + this.list.clientHeight >= this.list.scrollHeight - 4;
    this.list.append(row);
    while (this.list.children.length > SHOWN) this.list.firstElementChild?.remove();
    if (atBottom) this.list.scrollTop = this.list.scrollHeight;
    this.onEntry(entry);
  }

  private async show(entry: Entry, row: HTMLElement) {
    for (const selected of this.list.querySelectorAll(".selected")) selected.classList.remove("selected");
    row.classList.add("selected");
    const parts: Node[] = [
      make("div", {}, [
        entry.text === undefined
          ? `${entry.command} via ${entry.transport}, ${entry.ms} ms, ${entry.success ? "ok" : "failed"}`
          : `${entry.transport}: ${entry.text}`,
      ]),
    ];
    if (entry.error) parts.push(make("div", { className: "error" }, [entry.error]));
    parts.push(make("pre", {}, [JSON.stringify(entry.params, null, 2)]));
    const shotId = entry.screenshot ?? entry.seen;
    if (shotId !== undefined) parts.push(await this.screenshot(shotId, entry));
    this.detail.replaceChildren(...parts);
    this.detail.hidden = false;
  }

  /** The stored screenshot, with a marker at the entry's point (mapped into the image's pixels). */
  private async screenshot(id: number, entry: Entry): Promise<Node> {
    const res = await api(`/activity/screenshots/${id}`);
    if (!res.ok) return make("p", { className: "muted" }, ["That screenshot is no longer kept."]);
    const scale = Number(res.headers.get("x-screenshot-scale") ?? 1);
    const [ox, oy] = (res.headers.get("x-screenshot-origin") ?? "0,0").split(",").map(Number);
    if (this.shownImage) URL.revokeObjectURL(this.shownImage);
    this.shownImage = URL.createObjectURL(await res.blob());
    const image = make("img", { src: this.shownImage, alt: `screenshot ${id}` });
    const box = make("div", { className: "shot" }, [image]);
    const caption = make("p", { className: "muted" }, [
      entry.screenshot === id
        ? "The screenshot this command took."
        : "The last screenshot the agent took before this.",
    ]);
    if (entry.point) {
      image.onload = () => {
        const marker = make("div", { className: "marker", title: `${entry.point!.x}, ${entry.point!.y}` });
        marker.style.left = `${(((entry.point!.x - ox) * scale) / image.naturalWidth) * 100}%`;
        marker.style.top = `${(((entry.point!.y - oy) * scale) / image.naturalHeight) * 100}%`;
        box.append(marker);
      };
    }
    return make("div", {}, [caption, box]);
  }
}

function summary(entry: Entry): string {
  if (entry.point) return `(${entry.point.x}, ${entry.point.y})`;
  // A command sent without parameters has none in its entry.
  const text = JSON.stringify(entry.params ?? {});
  return text === "{}" ? "" : text.length > 80 ? `${text.slice(0, 80)}…` : text;
}
