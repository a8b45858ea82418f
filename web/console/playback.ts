/**
 * Watching back: the trajectories and video recordings on this server, and a player for a
 * trajectory: the video recorded while it ran (when there is one) beside its steps. A click on a step
 * seeks the video to it and shows the screenshot the step sent or had last seen, with its click drawn;
 * while the video plays, the step of the moment is highlighted.
 */
import type { ScreenshotRef, StepLine, TrajectoryLine } from "../../src/computer/core/trajectories/schema.js";
import type { TrajectoryEntry } from "../../src/computer/core/trajectories/trajectories.js";
import type { RecordingEntry } from "../../src/desktop/recording/recordings.js";
import { api, apiJson, element, make } from "./api.js";

interface TrajectoryReply {
  id: string;
  lines: TrajectoryLine[];
  recordings: RecordingEntry[];
}

export class Playback {
  private readonly trajectories = element<HTMLOListElement>("trajectories");
  private readonly recordings = element<HTMLOListElement>("recordings");
  private readonly player = element<HTMLElement>("player");
  private readonly video = element<HTMLVideoElement>("player-video");
  private readonly steps = element<HTMLOListElement>("player-steps");
  private readonly detail = element<HTMLElement>("player-step");
  private readonly title = element<HTMLElement>("player-title");
  private videoUrl?: string;
  private imageUrl?: string;
  /** Seconds into the video of each step, when there is a video. */
  private stepTimes: number[] = [];

  async start() {
    element<HTMLButtonElement>("refresh-recordings").onclick = () => void this.refresh();
    // While it plays, the step of the moment is highlighted; a seek made by picking a step keeps
    // that step (the video may land a few frames off, on another step's time).
    this.video.ontimeupdate = () => {
      if (!this.video.paused) this.follow();
    };
    await this.refresh();
  }

  async refresh() {
    const [{ trajectories }, { recordings }] = await Promise.all([
      apiJson<{ trajectories: TrajectoryEntry[] }>("/trajectories"),
      apiJson<{ recordings: RecordingEntry[] }>("/recordings"),
    ]);
    this.trajectories.replaceChildren(
      ...trajectories.map((t) => {
        const row = make("li", { className: "record" }, [
          make("span", { className: "record-name" }, [t.name ?? t.id]),
          make("span", { className: "muted" }, [`${t.steps} steps · ${t.state} · ${when(t.started)}`]),
          make("button", { type: "button", className: "download", title: "Download as one .tar" }, ["tar"]),
        ]);
        row.dataset.id = t.id;
        row.onclick = (event) => {
          if ((event.target as HTMLElement).tagName === "BUTTON") void download(`/trajectories/${t.id}.tar`);
          else void this.open(t.id);
        };
        return row;
      }),
    );
    if (trajectories.length === 0)
      this.trajectories.append(make("li", { className: "record muted" }, ["None yet."]));
    this.recordings.replaceChildren(
      ...recordings.map((r) => {
        const row = make("li", { className: "record" }, [
          make("span", { className: "record-name" }, [r.path.split("/").at(-1) ?? r.id]),
          make("span", { className: "muted" }, [
            `${r.duration_s === undefined ? "" : `${r.duration_s.toFixed(1)} s · `}${r.state} · ${when(r.started)}`,
          ]),
        ]);
        row.dataset.id = r.id;
        row.onclick = () => void this.openVideo(r);
        return row;
      }),
    );
    if (recordings.length === 0)
      this.recordings.append(make("li", { className: "record muted" }, ["None yet."]));
  }

  /** Shows a trajectory: its steps, and the video that overlaps it. */
  async open(id: string) {
    const reply = await apiJson<TrajectoryReply>(`/trajectories/${id}`);
    const start = reply.lines.find((l) => l.type === "start");
    const steps = reply.lines.filter((l): l is StepLine => l.type === "step");
    const recording = reply.recordings.find((r) => r.state !== "recording") ?? reply.recordings[0];
    this.player.hidden = false;
    this.title.textContent = `${start?.type === "start" ? (start.name ?? id) : id} — ${steps.length} steps`;
    this.detail.replaceChildren();
    await this.load(recording);
    const videoStart = recording ? Date.parse(recording.started) : 0;
    // A step is placed where it began (its time is when it finished): picking it shows the screen
    // the command acted on, and playing on from there shows what it did.
    this.stepTimes = steps.map((s) => Math.max(0, (Date.parse(s.time) - s.ms - videoStart) / 1000));
    this.steps.replaceChildren(
      ...steps.map((step, i) => {
        const row = make(
          "li",
          { className: step.success ? "record" : "record failed", title: step.error ?? "" },
          [
            make("span", { className: "muted" }, [`${step.step}`]),
            make("span", { className: "muted" }, [step.actor === "person" ? "person" : step.client]),
            make("span", { className: "record-name" }, [`${step.command} ${describe(step)}`]),
            make("span", { className: "muted" }, [
              recording ? `${this.stepTimes[i].toFixed(1)} s` : `${step.ms} ms`,
            ]),
          ],
        );
        row.dataset.step = String(step.step);
        row.onclick = () => void this.showStep(id, step, i, Boolean(recording));
        return row;
      }),
    );
  }

  private async openVideo(recording: RecordingEntry) {
    this.player.hidden = false;
    this.title.textContent = recording.path;
    this.steps.replaceChildren();
    this.detail.replaceChildren();
    this.stepTimes = [];
    await this.load(recording);
  }

  /** Loads a recording's file into the video element (or hides it when there is none). */
  private async load(recording: RecordingEntry | undefined) {
    if (this.videoUrl) URL.revokeObjectURL(this.videoUrl);
    this.videoUrl = undefined;
    this.video.hidden = !recording;
    if (!recording) {
      this.video.removeAttribute("src");
      return;
    }
    // Fetched with the page's credentials (a video element cannot send headers), then played locally.
    const res = await api(`/files${recording.path.split("/").map(encodeURIComponent).join("/")}`);
    if (!res.ok) {
      this.video.hidden = true;
      this.detail.replaceChildren(
        make("p", { className: "error" }, [`The video is gone: ${recording.path}`]),
      );
      return;
    }
    this.videoUrl = URL.createObjectURL(await res.blob());
    this.video.src = this.videoUrl;
  }

  private async showStep(id: string, step: StepLine, index: number, hasVideo: boolean) {
    this.select(index);
    if (hasVideo) this.video.currentTime = this.stepTimes[index];
    const parts: Node[] = [
      make("div", {}, [
        `${step.step}. ${step.command} by ${step.actor} via ${step.client}, ${step.ms} ms, `,
        step.success ? "ok" : "failed",
      ]),
    ];
    if (step.error) parts.push(make("div", { className: "error" }, [step.error]));
    parts.push(make("pre", {}, [JSON.stringify(step.params, null, 2)]));
    const shot = step.screenshot ?? step.seen;
    if (shot) parts.push(await this.screenshot(id, shot, step, shot === step.screenshot));
    this.detail.replaceChildren(...parts);
  }

  private async screenshot(id: string, shot: ScreenshotRef, step: StepLine, own: boolean): Promise<Node> {
    const res = await api(`/trajectories/${id}/${shot.file}`);
    if (!res.ok) return make("p", { className: "muted" }, ["That screenshot is not on disk."]);
    if (this.imageUrl) URL.revokeObjectURL(this.imageUrl);
    this.imageUrl = URL.createObjectURL(await res.blob());
    const image = make("img", { src: this.imageUrl, alt: `screenshot of step ${step.step}` });
    const box = make("div", { className: "shot" }, [image]);
    if (step.point) {
      const { x, y } = step.point;
      const marker = make("div", { className: "marker", title: `${x}, ${y}` });
      marker.style.left = `${(((x - shot.origin.x) * shot.scale) / shot.width) * 100}%`;
      marker.style.top = `${(((y - shot.origin.y) * shot.scale) / shot.height) * 100}%`;
      box.append(marker);
    }
    const caption = own
      ? "The screenshot this step sent."
      : "The screenshot seen before this step, with its click.";
    return make("div", {}, [make("p", { className: "muted" }, [caption]), box]);
  }

  /** Highlights the step of the video's current time. */
  private follow() {
    if (this.stepTimes.length === 0) return;
    const now = this.video.currentTime;
    let current = -1;
    this.stepTimes.forEach((t, i) => {
      if (t <= now + 0.05) current = i;
    });
    this.select(current);
  }

  private select(index: number) {
    for (const [i, row] of [...this.steps.children].entries()) row.classList.toggle("selected", i === index);
  }
}

/** Saves a file fetched with the page's credentials (a plain link cannot send them). */
async function download(path: string) {
  const res = await api(path);
  if (!res.ok) return;
  const url = URL.createObjectURL(await res.blob());
  const link = make("a", { href: url, download: path.split("/").at(-1) ?? "download" });
  link.click();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

function when(iso: string): string {
  return new Date(iso).toLocaleString([], { hourCycle: "h23" });
}

function describe(step: StepLine): string {
  if (step.point) return `(${step.point.x}, ${step.point.y})`;
  const text = JSON.stringify(step.params);
  return text === "{}" ? "" : text.length > 60 ? `${text.slice(0, 60)}…` : text;
}
