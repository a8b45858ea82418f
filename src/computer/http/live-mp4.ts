/**
 * A live stream as one endless fragmented MP4 over HTTP (`GET /live.mp4`, OSWorld's
 * `/live/h264.mp4`): the init segment, then a fragment per frame as it is encoded
 * (desktop/live/fmp4.ts), from a keyframe on. The reply starts once the stream has (`200
 * video/mp4`); a stream that cannot start (no display, no ffmpeg) is answered `503` with the reason.
 * A client that falls behind skips to the next keyframe; a restarted encoder with the same
 * configuration goes on in the same file, another one (the screen changed size) ends it.
 *
 * Chromium's `<video>` reads a stream of unknown length in blocks of tens of kilobytes, and probes
 * about twenty frames, before it plays: it starts within a second or two on a screen that changes,
 * and waits on one that is still (whose repeats are a few hundred bytes). The console's WebCodecs
 * view has no such wait.
 */
import type { Context } from "hono";
import { Fmp4Writer } from "../../desktop/live/fmp4.js";
import type { LiveStreams, StreamStart } from "../../desktop/live/live-streams.js";
import { replyByHand } from "./by-hand.js";
import type { ComputerEnv } from "./env.js";

/** A client holding this much unsent is behind: frames are skipped until the next keyframe. */
const BACKLOG_BYTES = 4 * 1024 * 1024;
/**
 * Players' streams go on while the screen is still: the picture is encoded again this often (the
 * encoder's repeats of an unchanged picture are a few hundred bytes). A player probes some twenty
 * frames before it shows the first (ffmpeg's stream analysis): with no frame while the screen is
 * still, it would wait until something changed. The console's stream (WebCodecs) has no repeats.
 */
export const PLAYER_REPEAT_MS = 200;

export const LIVE_MP4_HEADERS: Readonly<Record<string, string>> = {
  "content-type": "video/mp4",
  "cache-control": "no-store",
  "x-accel-buffering": "no",
};

type WatchSettings = Parameters<LiveStreams["watch"]>[0];

/**
 * Streams `settings` to the client until it goes; `still` (a share link's check) ends it when it
 * turns false. Resolves with the route's response once the stream has started or failed.
 */
export function liveMp4(
  c: Context<ComputerEnv>,
  streams: LiveStreams,
  settings: WatchSettings,
  still?: () => boolean,
): Promise<Response> {
  return new Promise((resolve) => {
    let res: ReturnType<typeof replyByHand>["res"] | undefined;
    let writer: Fmp4Writer | undefined;
    let first: StreamStart | undefined;
    let needKey = true;
    let watch: NodeJS.Timeout | undefined;
    const frameMs = 1000 / settings.fps;
    const watched = streams.watch(settings, {
      start: (start) => {
        if (!res) {
          first = start;
          const reply = replyByHand(c, 200, LIVE_MP4_HEADERS);
          res = reply.res;
          res.once("close", () => finish());
          res.on("error", () => finish());
          writer = new Fmp4Writer({
            video: { avcC: start.video.description, width: start.video.width, height: start.video.height },
            ...(start.audio
              ? {
                  audio: {
                    asc: start.audio.description,
                    sampleRate: start.audio.sampleRate,
                    channels: start.audio.channels,
                  },
                }
              : {}),
          });
          res.write(writer.init());
          if (still) watch = setInterval(() => !still() && finish(), 500);
          resolve(reply.done());
          return;
        }
        // A new encoder: the same file goes on if it decodes the same way, else the file ends.
        if (!first || !sameConfiguration(first, start)) return finish();
        needKey = true;
      },
      packet: (packet) => {
        if (!res || !writer) return;
        if (res.writableLength > BACKLOG_BYTES) {
          needKey = true;
          return;
        }
        if (needKey) {
          if (packet.kind !== "video" || !packet.key) return;
          needKey = false;
        }
        const bytes = packet.kind === "video" ? writer.video(packet, frameMs) : writer.audio(packet);
        if (bytes.length > 0) res.write(bytes);
      },
      end: (reason) => {
        if (res) return finish();
        resolve(c.json({ detail: reason }, 503));
      },
    });
    // A client gone before the stream started.
    c.env?.outgoing?.once("close", () => {
      if (!res) watched.close();
    });
    function finish() {
      clearInterval(watch);
      watched.close();
      if (res && !res.writableEnded) res.end();
    }
  });
}

function sameConfiguration(a: StreamStart, b: StreamStart): boolean {
  return (
    a.video.description.equals(b.video.description) &&
    a.video.width === b.video.width &&
    a.video.height === b.video.height &&
    Boolean(a.audio) === Boolean(b.audio) &&
    (!a.audio || a.audio.description.equals(b.audio!.description))
  );
}
