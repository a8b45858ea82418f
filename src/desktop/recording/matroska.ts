/**
 * The smallest Matroska stream that carries raw frames with their own timestamps, for feeding the
 * encoder through a pipe: a header naming one uncompressed video track (`V_UNCOMPRESSED`, packed
 * B,G,R bytes) and, with sound, a PCM track (`A_PCM/INT/LIT`, 16-bit), then one cluster per frame or block
 * of sound whose timestamp is its time in milliseconds. The raw video formats an encoder reads from
 * a pipe number frames at a constant rate; this lets a screen that stays still for a minute be one
 * frame followed by the next one a minute later, while the sound goes on beside it in the same
 * input (ffmpeg 5 reading the sound from a second input would wait for the next frame to read it).
 *
 * Only what FFmpeg's Matroska reader needs is written (EBML header, Segment of unknown size, Info,
 * Tracks, Clusters); no seek index (nothing seeks a pipe).
 *
 * @example
 * pipe.write(matroskaHeader({ width: 1920, height: 1080 }));
 * pipe.write(matroskaFrameHeader(1500, pixels.length)); pipe.write(pixels);
 */

/** EBML element ids (the bytes as written, length marker included). */
const ID = {
  EBML: 0x1a45dfa3,
  EBMLVersion: 0x4286,
  EBMLReadVersion: 0x42f7,
  EBMLMaxIDLength: 0x42f2,
  EBMLMaxSizeLength: 0x42f3,
  DocType: 0x4282,
  DocTypeVersion: 0x4287,
  DocTypeReadVersion: 0x4285,
  Segment: 0x18538067,
  Info: 0x1549a966,
  TimestampScale: 0x2ad7b1,
  MuxingApp: 0x4d80,
  WritingApp: 0x5741,
  Tracks: 0x1654ae6b,
  TrackEntry: 0xae,
  TrackNumber: 0xd7,
  TrackUID: 0x73c5,
  TrackType: 0x83,
  FlagLacing: 0x9c,
  DefaultDuration: 0x23e383,
  CodecID: 0x86,
  Video: 0xe0,
  PixelWidth: 0xb0,
  PixelHeight: 0xba,
  ColourSpace: 0x2eb524,
  Audio: 0xe1,
  SamplingFrequency: 0xb5,
  Channels: 0x9f,
  BitDepth: 0x6264,
  Cluster: 0x1f43b675,
  Timestamp: 0xe7,
  SimpleBlock: 0xa3,
} as const;

type Element = Buffer;

function idBytes(id: number): Buffer {
  const length = id > 0xffffff ? 4 : id > 0xffff ? 3 : id > 0xff ? 2 : 1;
  const out = Buffer.alloc(length);
  out.writeUIntBE(id, 0, length);
  return out;
}

/** An element size as an 8-byte EBML variable-length integer (simple, and enough for any frame). */
function sizeBytes(size: number): Buffer {
  const out = Buffer.alloc(8);
  out.writeUInt8(0x01, 0);
  out.writeUIntBE(Math.floor(size / 2 ** 32), 1, 3);
  out.writeUInt32BE(size % 2 ** 32, 4);
  return out;
}

/** The "unknown size" marker: the element runs until the stream ends. */
const UNKNOWN_SIZE = Buffer.from([0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);

function element(id: number, ...children: Buffer[]): Element {
  const body = Buffer.concat(children);
  return Buffer.concat([idBytes(id), sizeBytes(body.length), body]);
}

function uint(id: number, value: number): Element {
  const body = Buffer.alloc(8);
  body.writeBigUInt64BE(BigInt(value));
  let start = 0;
  while (start < 7 && body[start] === 0) start++;
  return element(id, body.subarray(start));
}

function text(id: number, value: string): Element {
  return element(id, Buffer.from(value, "ascii"));
}

export interface TrackShape {
  width: number;
  height: number;
  /** The shortest time between frames (the frame rate cap), in ms: what the last frame is shown for. */
  frameMs: number;
  /** A second track of 16-bit little-endian PCM, interleaved channels. */
  audio?: { sampleRate: number; channels: number };
}

/** The track numbers of the stream's frames and of its sound. */
export const VIDEO_TRACK = 1;
export const AUDIO_TRACK = 2;

function float(id: number, value: number): Element {
  const body = Buffer.alloc(8);
  body.writeDoubleBE(value);
  return element(id, body);
}

/** The stream's start: EBML header, an open Segment, Info (millisecond timestamps) and the tracks. */
export function matroskaHeader({ width, height, frameMs, audio }: TrackShape): Buffer {
  const ebml = element(
    ID.EBML,
    uint(ID.EBMLVersion, 1),
    uint(ID.EBMLReadVersion, 1),
    uint(ID.EBMLMaxIDLength, 4),
    uint(ID.EBMLMaxSizeLength, 8),
    text(ID.DocType, "matroska"),
    uint(ID.DocTypeVersion, 4),
    uint(ID.DocTypeReadVersion, 2),
  );
  const info = element(
    ID.Info,
    uint(ID.TimestampScale, 1_000_000),
    text(ID.MuxingApp, "hangar"),
    text(ID.WritingApp, "hangar"),
  );
  const sound =
    audio &&
    element(
      ID.TrackEntry,
      uint(ID.TrackNumber, AUDIO_TRACK),
      uint(ID.TrackUID, AUDIO_TRACK),
      uint(ID.TrackType, 2),
      uint(ID.FlagLacing, 0),
      text(ID.CodecID, "A_PCM/INT/LIT"),
      element(
        ID.Audio,
        float(ID.SamplingFrequency, audio.sampleRate),
        uint(ID.Channels, audio.channels),
        uint(ID.BitDepth, 16),
      ),
    );
  const tracks = element(
    ID.Tracks,
    element(
      ID.TrackEntry,
      uint(ID.TrackNumber, VIDEO_TRACK),
      uint(ID.TrackUID, VIDEO_TRACK),
      uint(ID.TrackType, 1),
      uint(ID.FlagLacing, 0),
      uint(ID.DefaultDuration, Math.round(frameMs * 1_000_000)),
      text(ID.CodecID, "V_UNCOMPRESSED"),
      element(
        ID.Video,
        uint(ID.PixelWidth, width),
        uint(ID.PixelHeight, height),
        // Packed B,G,R (ffmpeg's FourCC for bgr24: "BGR" and 24), as the feed makes them.
        element(ID.ColourSpace, Buffer.from([0x42, 0x47, 0x52, 24])),
      ),
    ),
    ...(sound ? [sound] : []),
  );
  return Buffer.concat([ebml, idBytes(ID.Segment), UNKNOWN_SIZE, info, tracks]);
}

/**
 * Bytes of a frame's (or a block of sound's) cluster before its data: Cluster, its Timestamp, the
 * SimpleBlock header.
 */
export function matroskaFrameHeader(timestampMs: number, pixelBytes: number, track = VIDEO_TRACK): Buffer {
  const timestamp = uint(ID.Timestamp, Math.max(0, Math.round(timestampMs)));
  // The track, timestamp 0 relative to the cluster, flags: keyframe.
  const blockHead = Buffer.from([0x80 | track, 0x00, 0x00, 0x80]);
  const block = Buffer.concat([idBytes(ID.SimpleBlock), sizeBytes(blockHead.length + pixelBytes), blockHead]);
  const clusterSize = timestamp.length + block.length + pixelBytes;
  return Buffer.concat([idBytes(ID.Cluster), sizeBytes(clusterSize), timestamp, block]);
}
