/**
 * Reads the live stream's sound as the encoder writes it: AAC in ADTS (ISO/IEC 13818-7 §6.2), a
 * 7-byte header (9 with a CRC) before each frame, which says the frame's length. Each frame is
 * handed on without its header; WebCodecs and MP4 take an AudioSpecificConfig (ISO/IEC 14496-3
 * §1.6.2.1) instead, which `aacConfig` makes for the encoder's settings.
 *
 * The sound has its own encoder output, not the video's: ffmpeg 5's muxer holds one stream's
 * packets back until every stream has one, and a still screen has no frames for minutes.
 *
 * @example
 * const reader = new AdtsReader((frame) => …); const asc = aacConfig(48000, 2);
 * output.on("data", (chunk) => reader.push(chunk));
 */

const HEADER = 7;
const CRC = 2;

export class AdtsReader {
  private pending: Buffer = Buffer.alloc(0);

  constructor(private readonly onFrame: (frame: Buffer) => void) {}

  /** Takes the next bytes of the stream; calls back for every frame they complete. */
  push(chunk: Buffer) {
    this.pending = this.pending.length ? Buffer.concat([this.pending, chunk]) : chunk;
    while (this.pending.length >= HEADER) {
      const head = this.pending;
      if (head[0] !== 0xff || (head[1] & 0xf0) !== 0xf0)
        throw new Error("the encoder's ADTS output lost its sync");
      const length = ((head[3] & 0x03) << 11) | (head[4] << 3) | (head[5] >> 5);
      const headerBytes = head[1] & 0x01 ? HEADER : HEADER + CRC;
      if (length < headerBytes)
        throw new Error("the encoder's ADTS output has a frame shorter than its header");
      if (head.length < length) return;
      this.onFrame(Buffer.from(head.subarray(headerBytes, length)));
      this.pending = head.subarray(length);
    }
  }
}

const RATES = [96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350];

/**
 * The AudioSpecificConfig of AAC-LC (object type 2) at this rate and channel count: what the
 * encoder's frames need, known before the first of them (the sound starts a second or two late).
 */
export function aacConfig(sampleRate: number, channels: number): Buffer {
  const rateIndex = RATES.indexOf(sampleRate);
  if (rateIndex < 0) throw new Error(`AAC has no rate ${sampleRate}`);
  return Buffer.from([(2 << 3) | (rateIndex >> 1), ((rateIndex & 1) << 7) | (channels << 3)]);
}
