/**
 * Images for container desktops: present on the engine, or made so once. The service's desktop
 * image (`--desktop-image`, default `hangar:latest`) is built from the project's Dockerfile when
 * the service runs from a checkout that has one, pulled otherwise; any other image is pulled.
 * One preparation per reference at a time, its progress in the host log and in `status()`.
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { HostError } from "../errors.js";
import type { HostLog } from "../host-log.js";
import { type Engine, engineError, engineMessage, statusOf } from "./engine.js";

/** What the Dockerfile copies: the build context sent to the engine (nothing else of the checkout). */
const BUILD_CONTEXT = [
  "Dockerfile",
  "package.json",
  "package-lock.json",
  "tsconfig.json",
  "tsconfig.build.json",
  "src",
  "commands",
  "bin",
  "web",
  "scripts",
  "deploy",
];

/** The desktop user of Hangar's image, who runs the agent's programs when the image starts as root. */
export const DESKTOP_USER = "hangar";
/** Hangar's entry point (the Dockerfile's ENTRYPOINT), in its image and images made from it. */
const HANGAR_ENTRYPOINT = "/opt/hangar/dist/cli/container.js";

/** What of an image's or container's configuration says how it starts. */
export interface ContainerConfig {
  Entrypoint?: string[] | string | null;
  Env?: string[] | null;
}

/**
 * Whether it starts Hangar's entry point with a desktop of its own: such a container started as root
 * keeps the server root and gives the agent the desktop user (not with a display another program
 * starts, E2B's desktop template, whose desktop is the SDK's).
 */
export function runsHangarEntrypoint(config: ContainerConfig | undefined): boolean {
  const entry = config?.Entrypoint;
  const words = Array.isArray(entry) ? entry : typeof entry === "string" ? [entry] : [];
  const external = (config?.Env ?? []).some((v) => /^HANGAR_EXTERNAL_DISPLAY=./.test(v));
  return words.some((w) => w.includes(HANGAR_ENTRYPOINT)) && !external;
}

export interface ImagePreparation {
  image: string;
  state: "pulling" | "building" | "failed";
  /** Percent pulled, or the build's step as `n/m`. */
  progress: string;
  error: string | null;
}

/** An image built by a Dockerfile of its own on top of another image (E2B's `desktop` template). */
export interface ImageRecipe {
  /** The directory sent to the engine, and the files of it that the build uses. */
  context: string;
  files: string[];
  /** The image it is built on, made ready first, and the build argument that names it. */
  base: string;
  baseArg: string;
}

export class DesktopImages {
  private readonly preparing = new Map<string, Promise<void>>();
  private readonly states = new Map<string, ImagePreparation>();
  private readonly recipes = new Map<string, ImageRecipe>();

  constructor(
    private readonly engine: Engine,
    readonly desktopImage: string,
    private readonly log: HostLog,
    /** The checkout whose Dockerfile builds the desktop image (default: this package's, if it has one). */
    private readonly buildContext: string | undefined = packageRootWithDockerfile(),
  ) {}

  /** True when the engine has the image. */
  async has(image: string): Promise<boolean> {
    try {
      await this.engine.docker.getImage(image).inspect();
      return true;
    } catch (err) {
      if (statusOf(err) === 404) return false;
      throw engineError(err, this.engine, `looking for image ${image}`);
    }
  }

  /**
   * Makes sure the engine has the image: built or pulled once when missing (concurrent callers wait
   * together). Resolves with how it starts (its configuration), read once it is there.
   */
  async ensure(image: string): Promise<ContainerConfig> {
    const present = await this.configOf(image);
    if (present) return present;
    await this.prepared(image);
    const made = await this.configOf(image);
    if (!made) throw new HostError("failed", `Image ${image} is not on the engine after it was prepared`);
    return made;
  }

  /** The image's configuration, or undefined when the engine does not have it. */
  private async configOf(image: string): Promise<ContainerConfig | undefined> {
    try {
      return (await this.engine.docker.getImage(image).inspect()).Config;
    } catch (err) {
      if (statusOf(err) === 404) return undefined;
      throw engineError(err, this.engine, `looking for image ${image}`);
    }
  }

  /** Builds or pulls the image once (concurrent callers wait together). */
  private prepared(image: string): Promise<void> {
    let work = this.preparing.get(image);
    if (!work) {
      work = this.prepare(image).finally(() => this.preparing.delete(image));
      this.preparing.set(image, work);
    }
    return work;
  }

  /** `image` is built from `recipe` when it is missing, instead of pulled. */
  addRecipe(image: string, recipe: ImageRecipe) {
    this.recipes.set(image, recipe);
  }

  /** Preparations in progress or failed, for `GET /svc/images`. */
  status(): ImagePreparation[] {
    return [...this.states.values()];
  }

  /** Pulls an image (POST /svc/pull of a container image), even when present: a newer one may be there. */
  async pull(image: string): Promise<void> {
    await this.withState(image, "pulling", () => this.pullImage(image));
  }

  private async prepare(image: string) {
    if (await this.has(image)) return;
    const recipe = this.recipes.get(image);
    if (recipe) {
      await this.ensure(recipe.base);
      await this.withState(image, "building", () =>
        this.buildImage(image, recipe.context, recipe.files, { [recipe.baseArg]: recipe.base }),
      );
      return;
    }
    const build = image === this.desktopImage && this.buildContext !== undefined;
    await this.withState(image, build ? "building" : "pulling", () =>
      build ? this.buildImage(image, this.buildContext as string, BUILD_CONTEXT) : this.pullImage(image),
    );
  }

  private async withState(image: string, state: "pulling" | "building", work: () => Promise<void>) {
    const entry: ImagePreparation = {
      image,
      state,
      progress: state === "pulling" ? "0%" : "0/?",
      error: null,
    };
    this.states.set(image, entry);
    try {
      await work();
      this.states.delete(image);
    } catch (err) {
      entry.state = "failed";
      entry.error = (err as Error).message;
      throw err;
    }
  }

  private async pullImage(image: string) {
    await this.log.info("Container image pull started", { image });
    const entry = this.states.get(image);
    let logged = 0;
    try {
      const stream = await this.engine.docker.pull(image);
      await new Promise<void>((resolve, reject) => {
        const layers = new Map<string, { current: number; total: number }>();
        this.engine.docker.modem.followProgress(
          stream,
          (err: Error | null, output: { error?: string }[]) => {
            const failure = err?.message ?? output?.find((o) => o.error)?.error;
            if (failure) reject(new Error(failure));
            else resolve();
          },
          (event: { id?: string; progressDetail?: { current?: number; total?: number } }) => {
            if (event.id && event.progressDetail?.total) {
              layers.set(event.id, {
                current: event.progressDetail.current ?? 0,
                total: event.progressDetail.total,
              });
            }
            let done = 0;
            let total = 0;
            for (const layer of layers.values()) {
              done += layer.current;
              total += layer.total;
            }
            const percent = total > 0 ? Math.floor((100 * done) / total) : 0;
            if (entry) entry.progress = `${percent}%`;
            if (percent >= logged + 25) {
              logged = Math.floor(percent / 25) * 25;
              void this.log.info("Container image pull progress", { image, percent: logged });
            }
          },
        );
      });
    } catch (err) {
      const failure = engineError(err, this.engine, `Pulling image ${image}`);
      await this.log.error("Container image pull failed", { image, error: failure.message });
      throw failure;
    }
    await this.log.info("Container image pulled", { image });
  }

  private async buildImage(
    image: string,
    context: string,
    files: string[],
    buildargs?: Record<string, string>,
  ) {
    await this.log.info("Desktop image build started (a Dockerfile of the project; this takes minutes)", {
      image,
      context,
    });
    const entry = this.states.get(image);
    try {
      const stream = await this.engine.docker.buildImage({ context, src: files }, { t: image, buildargs });
      await new Promise<void>((resolve, reject) => {
        this.engine.docker.modem.followProgress(
          stream,
          (err: Error | null, output: { error?: string }[]) => {
            const failure = err?.message ?? output?.find((o) => o.error)?.error;
            if (failure) reject(new Error(failure));
            else resolve();
          },
          (event: { stream?: string }) => {
            const step = /^\s*STEP (\d+\/\d+)|^Step (\d+\/\d+)/i.exec(event.stream ?? "");
            if (step) {
              if (entry) entry.progress = step[1] ?? step[2];
              void this.log.info("Desktop image build progress", {
                image,
                step: step[1] ?? step[2],
                line: (event.stream ?? "").trim().slice(0, 160),
              });
            }
          },
        );
      });
    } catch (err) {
      await this.log.error("Desktop image build failed", { image, error: engineMessage(err) });
      throw new HostError("failed", `Cannot build the desktop image ${image}: ${engineMessage(err)}`);
    }
    if (!(await this.has(image))) {
      throw new HostError("failed", `The desktop image build ended without an image ${image}`);
    }
    await this.log.info("Desktop image built", { image });
  }
}

/** This package's directory when it is a checkout with the Dockerfile (an npm install has none). */
function packageRootWithDockerfile(): string | undefined {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    const manifest = join(dir, "package.json");
    if (existsSync(manifest)) {
      try {
        const name = (JSON.parse(readFileSync(manifest, "utf8")) as { name?: string }).name;
        if (name === "hangar") return existsSync(join(dir, "Dockerfile")) ? dir : undefined;
      } catch {
        return undefined;
      }
    }
    dir = dirname(dir);
  }
  return undefined;
}
