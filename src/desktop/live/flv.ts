/**
 * Reads the FLV stream the live encoder writes (ffmpeg's `flv` muxer, which writes each packet as it
 * comes: no packet waits for the next one, as fragmented MP4's does) into media packets: H.264 access
 * units as length-prefixed NAL units with their decoder configuration (`avcC`). Those are what
 * WebCodecs decodes and what an MP4 sample holds, so the packets go to the browser and into
 * fragmented MP4 (fmp4.ts) unchanged. (The sound comes as ADTS: adts.ts.)
 *
 * FLV: a 9-byte header and a 4-byte zero, then tags of an 11-byte header (type, 24-bit size, 24-bit
 * timestamp in ms and its upper byte, stream id) and the data, each followed by its 4-byte size.
 *
 * @example
 * const reader = new FlvReader((packet) => …);
 * encoderOutput.on("data", (chunk) => reader.push(chunk));
 */

export interface MediaPacket {
  kind: "video" | "audio";
  /** Milliseconds since the encoder's start. */
  timestampMs: number;
  /** A keyframe (video): decoding may start here. Every audio frame is one. */
  key: boolean;
  data: Buffer;
}

/** A track's decoder configuration: `avcC` for H.264, AudioSpecificConfig for AAC. */
export interface TrackConfig {
  kind: "video" | "audio";
  description: Buffer;
}

const TAG_VIDEO = 9;
const CODEC_AVC = 7;
const HEADER_BYTES = 9 + 4;
const TAG_HEADER_BYTES = 11;
/** Larger tags are not what ffmpeg writes for a screen: the stream is taken to be broken. */
const LARGEST_TAG = 64 * 1024 * 1024;

export class FlvReader {
  private buffered: Buffer[] = [];
  private length = 0;
  private headerRead = false;

  constructor(
    private readonly onPacket: (packet: MediaPacket) => void,
    private readonly onConfig: (config: TrackConfig) => void,
  ) {}

  /** Takes the next bytes of the stream; calls back for every tag they complete. */
  push(chunk: Buffer) {
    this.buffered.push(chunk);
    this.length += chunk.length;
    for (;;) {
      if (!this.headerRead) {
        if (this.length < HEADER_BYTES) return;
        const head = this.take(HEADER_BYTES);
        if (head.toString("latin1", 0, 3) !== "FLV") throw new Error("the encoder's output is not FLV");
        this.headerRead = true;
        continue;
      }
      if (this.length < TAG_HEADER_BYTES) return;
      const head = this.peek(TAG_HEADER_BYTES);
      const size = head.readUIntBE(1, 3);
      if (size > LARGEST_TAG) throw new Error(`an FLV tag of ${size} bytes: the encoder's output is broken`);
      if (this.length < TAG_HEADER_BYTES + size + 4) return;
      const tag = this.take(TAG_HEADER_BYTES + size + 4);
      const timestampMs = (tag.readUIntBE(4, 3) | (tag[7] << 24)) >>> 0;
      this.tag(tag[0], timestampMs, tag.subarray(TAG_HEADER_BYTES, TAG_HEADER_BYTES + size));
    }
  }

  private tag(type: number, timestampMs: number, data: Buffer) {
    if (type === TAG_VIDEO && data.length >= 5 && (data[0] & 0x0f) === CODEC_AVC) {
      const payload = data.subarray(5);
      if (data[1] === 0) this.onConfig({ kind: "video", description: payload });
      else if (data[1] === 1 && payload.length > 0) {
        // No B-frames are made (zerolatency), so the composition offset (bytes 2-4) is 0.
        this.onPacket({ kind: "video", timestampMs, key: data[0] >> 4 === 1, data: payload });
      }
    }
    // Script data (onMetaData) and anything else: nothing a player needs.
  }

  private peek(bytes: number): Buffer {
    if (this.buffered[0].length < bytes) this.buffered = [Buffer.concat(this.buffered)];
    return this.buffered[0].subarray(0, bytes);
  }

  private take(bytes: number): Buffer {
    const head = this.peek(bytes);
    const rest = this.buffered[0].subarray(bytes);
    if (rest.length > 0) this.buffered[0] = rest;
    else this.buffered.shift();
    this.length -= bytes;
    return head;
  }
}

/** The WebCodecs codec string of an `avcC` (`avc1.PPCCLL`) or an AudioSpecificConfig (`mp4a.40.N`). */
export function codecString(config: TrackConfig): string {
  const hex = (n: number) => n.toString(16).padStart(2, "0");
  const d = config.description;
  if (config.kind === "video") return `avc1.${hex(d[1])}${hex(d[2])}${hex(d[3])}`;
  return `mp4a.40.${d[0] >> 3}`;
}

/** An AudioSpecificConfig's sample rate and channels. */
export function audioShape(asc: Buffer): { sampleRate: number; channels: number } {
  const RATES = [96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350];
  const index = ((asc[0] & 0x07) << 1) | (asc[1] >> 7);
  return { sampleRate: RATES[index] ?? 48000, channels: (asc[1] >> 3) & 0x0f };
}
