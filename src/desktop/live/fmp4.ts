/**
 * Fragmented MP4 (ISO BMFF) of the live stream, written from the encoder's packets (flv.ts) as they
 * come: an init segment (`ftyp` + `moov` naming an H.264 track and, with sound, an AAC one), then a
 * `moof` + `mdat` fragment per video frame, and one per few audio frames. ffmpeg's own MP4 muxer
 * writes a fragment when the next packet arrives, so a still screen's last change would wait for the
 * next; here each frame leaves at once. A plain `<video>`, ffplay or VLC plays it.
 *
 * Only the boxes a player needs are written (ISO/IEC 14496-12 and -15): no edit lists, no
 * composition offsets (no B-frames), one sample description per track.
 *
 * @example
 * const mp4 = new Fmp4Writer({ video: { avcC, width, height }, audio: { asc, sampleRate, channels } });
 * res.write(mp4.init()); res.write(mp4.video(packet)); …
 */
import type { MediaPacket } from "./flv.js";

export interface Fmp4Tracks {
  video: { avcC: Buffer; width: number; height: number };
  audio?: { asc: Buffer; sampleRate: number; channels: number };
}

/**
 * Video time in 90 kHz ticks, as is usual for video: with a coarser one (1 kHz) FFmpeg's stream
 * probe, which Chromium runs on a plain `<video>`, waits for twice as many frames before it plays.
 */
const VIDEO_TIMESCALE = 90_000;
const TICKS_PER_MS = VIDEO_TIMESCALE / 1000;
const VIDEO_TRACK = 1;
const AUDIO_TRACK = 2;
/** AAC frames hold 1024 samples. */
const AAC_FRAME = 1024;
/** Audio frames written in one fragment (about 100 ms at 48 kHz): fewer boxes, a little later. */
const AUDIO_FRAMES_PER_FRAGMENT = 5;
/** Sample flags: a sync sample (depends on no other), and a sample that depends on others. */
const SYNC_SAMPLE = 0x02000000;
const NON_SYNC_SAMPLE = 0x01010000;

function box(type: string, ...body: Buffer[]): Buffer {
  const size = 8 + body.reduce((sum, part) => sum + part.length, 0);
  const head = Buffer.alloc(8);
  head.writeUInt32BE(size, 0);
  head.write(type, 4, "latin1");
  return Buffer.concat([head, ...body]);
}

/** A full box: version and flags before the body. */
function fullBox(type: string, version: number, flags: number, ...body: Buffer[]): Buffer {
  const head = Buffer.alloc(4);
  head.writeUInt32BE(((version << 24) | flags) >>> 0, 0);
  return box(type, head, ...body);
}

function u32(...values: number[]): Buffer {
  const out = Buffer.alloc(values.length * 4);
  for (const [i, v] of values.entries()) out.writeUInt32BE(v >>> 0, i * 4);
  return out;
}

function u16(...values: number[]): Buffer {
  const out = Buffer.alloc(values.length * 2);
  for (const [i, v] of values.entries()) out.writeUInt16BE(v, i * 2);
  return out;
}

const UNITY_MATRIX = u32(0x00010000, 0, 0, 0, 0x00010000, 0, 0, 0, 0x40000000);

export class Fmp4Writer {
  private sequence = 0;
  private pendingAudio: MediaPacket[] = [];
  /** The next audio frame's decode time, in samples: AAC frames follow each other without gaps. */
  private audioTime: number | undefined;

  constructor(private readonly tracks: Fmp4Tracks) {}

  /** `ftyp` and `moov`: what a player reads before any frame. */
  init(): Buffer {
    const { audio } = this.tracks;
    const ftyp = box(
      "ftyp",
      Buffer.from("isom", "latin1"),
      u32(0x200),
      Buffer.from("isomiso5avc1mp41", "latin1"),
    );
    const mvhd = fullBox(
      "mvhd",
      0,
      0,
      u32(0, 0, 1000, 0, 0x00010000),
      u16(0x0100, 0),
      u32(0, 0),
      UNITY_MATRIX,
      u32(0, 0, 0, 0, 0, 0),
      u32(audio ? AUDIO_TRACK + 1 : VIDEO_TRACK + 1),
    );
    const traks = [this.videoTrak()];
    const trexes = [trex(VIDEO_TRACK)];
    if (audio) {
      traks.push(this.audioTrak());
      trexes.push(trex(AUDIO_TRACK));
    }
    return Buffer.concat([ftyp, box("moov", mvhd, ...traks, box("mvex", ...trexes))]);
  }

  /**
   * A fragment holding this video frame, preceded by the audio frames waiting; `durationMs` is how
   * long it is shown at most (the frame rate cap), should no frame follow.
   */
  video(packet: MediaPacket, durationMs: number): Buffer {
    const audio = this.flushAudio();
    const fragment = this.fragment(VIDEO_TRACK, Math.round(packet.timestampMs * TICKS_PER_MS), [
      { duration: Math.max(1, Math.round(durationMs * TICKS_PER_MS)), data: packet.data, key: packet.key },
    ]);
    return audio.length ? Buffer.concat([audio, fragment]) : fragment;
  }

  /** Keeps an audio frame; a fragment of them comes out every few frames (or with the next video frame). */
  audio(packet: MediaPacket): Buffer {
    if (!this.tracks.audio) return Buffer.alloc(0);
    this.pendingAudio.push(packet);
    return this.pendingAudio.length >= AUDIO_FRAMES_PER_FRAGMENT ? this.flushAudio() : Buffer.alloc(0);
  }

  private flushAudio(): Buffer {
    const audio = this.tracks.audio;
    if (!audio || this.pendingAudio.length === 0) return Buffer.alloc(0);
    const frames = this.pendingAudio;
    this.pendingAudio = [];
    // The first frame's time places the track; after it, frames follow each other.
    this.audioTime ??= Math.round((frames[0].timestampMs * audio.sampleRate) / 1000);
    const start = this.audioTime;
    this.audioTime += frames.length * AAC_FRAME;
    return this.fragment(
      AUDIO_TRACK,
      start,
      frames.map((f) => ({ duration: AAC_FRAME, data: f.data, key: true })),
    );
  }

  private fragment(
    track: number,
    decodeTime: number,
    samples: { duration: number; data: Buffer; key: boolean }[],
  ) {
    this.sequence++;
    const mfhd = fullBox("mfhd", 0, 0, u32(this.sequence));
    // default-base-is-moof: data offsets count from the moof's first byte.
    const tfhd = fullBox("tfhd", 0, 0x020000, u32(track));
    const time = Buffer.alloc(8);
    time.writeBigUInt64BE(BigInt(Math.max(0, decodeTime)));
    const tfdt = fullBox("tfdt", 1, 0, time);
    // data-offset, sample-duration, sample-size, sample-flags present.
    const trunFlags = 0x000001 | 0x000100 | 0x000200 | 0x000400;
    const entries = samples.map((s) => u32(s.duration, s.data.length, s.key ? SYNC_SAMPLE : NON_SYNC_SAMPLE));
    const trunSize = 12 + 8 + entries.length * 12;
    const moofSize = 8 + mfhd.length + 8 + tfhd.length + tfdt.length + trunSize;
    const trun = fullBox("trun", 0, trunFlags, u32(samples.length, moofSize + 8), ...entries);
    const moof = box("moof", mfhd, box("traf", tfhd, tfdt, trun));
    return Buffer.concat([moof, box("mdat", ...samples.map((s) => s.data))]);
  }

  private videoTrak(): Buffer {
    const { avcC, width, height } = this.tracks.video;
    const avc1 = box(
      "avc1",
      Buffer.alloc(6),
      u16(1), // data reference index
      Buffer.alloc(16), // pre-defined and reserved
      u16(width, height),
      u32(0x00480000, 0x00480000, 0), // 72 dpi, reserved
      u16(1), // one frame per sample
      Buffer.alloc(32), // compressor name
      u16(0x0018, 0xffff), // depth 24, pre-defined -1
      box("avcC", avcC),
    );
    const vmhd = fullBox("vmhd", 0, 1, u16(0, 0, 0, 0));
    return trak(VIDEO_TRACK, VIDEO_TIMESCALE, "vide", vmhd, avc1, { width, height, volume: 0 });
  }

  private audioTrak(): Buffer {
    const audio = this.tracks.audio!;
    const mp4a = box(
      "mp4a",
      Buffer.alloc(6),
      u16(1),
      u32(0, 0),
      u16(audio.channels, 16, 0, 0),
      u32(audio.sampleRate * 65536),
      esds(audio.asc),
    );
    const smhd = fullBox("smhd", 0, 0, u16(0, 0));
    return trak(AUDIO_TRACK, audio.sampleRate, "soun", smhd, mp4a, { width: 0, height: 0, volume: 0x0100 });
  }
}

function trak(
  id: number,
  timescale: number,
  handler: string,
  mediaHeader: Buffer,
  sampleEntry: Buffer,
  shape: { width: number; height: number; volume: number },
): Buffer {
  const tkhd = fullBox(
    "tkhd",
    0,
    0x000003, // enabled, in the movie
    u32(0, 0, id, 0, 0, 0, 0),
    u16(0, 0, shape.volume, 0),
    UNITY_MATRIX,
    u32(shape.width * 65536, shape.height * 65536),
  );
  const mdhd = fullBox("mdhd", 0, 0, u32(0, 0, timescale, 0), u16(0x55c4, 0)); // language "und"
  const hdlr = fullBox(
    "hdlr",
    0,
    0,
    u32(0),
    Buffer.from(handler, "latin1"),
    u32(0, 0, 0),
    Buffer.from("hangar\0"),
  );
  const dinf = box("dinf", fullBox("dref", 0, 0, u32(1), fullBox("url ", 0, 1)));
  const stbl = box(
    "stbl",
    fullBox("stsd", 0, 0, u32(1), sampleEntry),
    fullBox("stts", 0, 0, u32(0)),
    fullBox("stsc", 0, 0, u32(0)),
    fullBox("stsz", 0, 0, u32(0, 0)),
    fullBox("stco", 0, 0, u32(0)),
  );
  return box("trak", tkhd, box("mdia", mdhd, hdlr, box("minf", mediaHeader, dinf, stbl)));
}

function trex(track: number): Buffer {
  return fullBox("trex", 0, 0, u32(track, 1, 0, 0, 0));
}

/** The elementary stream descriptor of an AAC track: its AudioSpecificConfig in MPEG-4 descriptors. */
function esds(asc: Buffer): Buffer {
  const descriptor = (tag: number, ...body: Buffer[]) => {
    const content = Buffer.concat(body);
    return Buffer.concat([Buffer.from([tag, content.length]), content]);
  };
  const decoderSpecific = descriptor(0x05, asc);
  // Object type 0x40 (MPEG-4 audio), stream type 5 (audio) << 2 | 1, buffer size, bit rates.
  const decoderConfig = descriptor(0x04, Buffer.from([0x40, 0x15, 0, 0, 0]), u32(0, 0), decoderSpecific);
  const sl = descriptor(0x06, Buffer.from([0x02]));
  const es = descriptor(0x03, u16(0), Buffer.from([0]), decoderConfig, sl);
  return fullBox("esds", 0, 0, es);
}
