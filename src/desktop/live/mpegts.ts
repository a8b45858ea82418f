/**
 * Where a viewer may join an MPEG-TS stream that is already running: the stream's latest tables (PAT,
 * PMT) and its packets from the last keyframe on. ffmpeg's `mpegts` muxer marks a keyframe's first
 * packet with the adaptation field's random access indicator; a viewer handed the tables and then the
 * packets from there decodes from its first picture. Only packet headers are read (ISO/IEC 13818-1
 * §2.4.3): 188-byte packets, sync byte 0x47, PID, payload start, adaptation field flags.
 *
 * @example
 * const ts = new TsJoinPoint();
 * for (const packets of ts.push(chunk)) …; viewer.write(ts.joinBytes());
 */

const PACKET = 188;
const SYNC = 0x47;
const PAT_PID = 0;
/** Bytes of packets kept since the last keyframe; beyond, a new viewer waits for the next keyframe. */
const KEPT_BYTES = 16 * 1024 * 1024;

export class TsJoinPoint {
  private rest: Buffer = Buffer.alloc(0);
  private pmtPid: number | undefined;
  private pat: Buffer | undefined;
  private pmt: Buffer | undefined;
  private sinceKey: Buffer[] = [];
  private sinceKeyBytes = 0;
  private sawKey = false;

  /** Takes the next bytes of the stream; returns them cut to whole packets (what can be sent on). */
  push(chunk: Buffer): Buffer {
    const bytes = this.rest.length ? Buffer.concat([this.rest, chunk]) : chunk;
    const whole = bytes.length - (bytes.length % PACKET);
    this.rest = Buffer.from(bytes.subarray(whole));
    const packets = bytes.subarray(0, whole);
    let keepFrom = this.sawKey ? 0 : -1;
    for (let at = 0; at < packets.length; at += PACKET) {
      if (!this.look(packets.subarray(at, at + PACKET))) continue;
      this.sawKey = true;
      this.sinceKey = [];
      this.sinceKeyBytes = 0;
      keepFrom = at;
    }
    if (keepFrom >= 0 && keepFrom < packets.length) this.keep(packets.subarray(keepFrom));
    return packets;
  }

  /** The tables and the packets since the last keyframe, or nothing before the first keyframe. */
  joinBytes(): Buffer {
    if (!this.sawKey || !this.pat || !this.pmt) return Buffer.alloc(0);
    return Buffer.concat([this.pat, this.pmt, ...this.sinceKey]);
  }

  private keep(packets: Buffer) {
    if (this.sinceKeyBytes + packets.length > KEPT_BYTES) {
      // A keyframe too long ago: a new viewer waits for the next one.
      this.sawKey = false;
      this.sinceKey = [];
      this.sinceKeyBytes = 0;
      return;
    }
    this.sinceKey.push(Buffer.from(packets));
    this.sinceKeyBytes += packets.length;
  }

  /** Reads a packet's header, keeping the tables; true when a keyframe starts in it. */
  private look(packet: Buffer): boolean {
    if (packet[0] !== SYNC) throw new Error("the encoder's MPEG-TS output lost its packet sync");
    const pid = ((packet[1] & 0x1f) << 8) | packet[2];
    const payloadStart = (packet[1] & 0x40) !== 0;
    const hasAdaptation = (packet[3] & 0x20) !== 0;
    if (pid === PAT_PID && payloadStart) {
      this.pat = Buffer.from(packet);
      // The first program's PMT PID: after the pointer field, the 8-byte table header, program number.
      const payload = 4 + (hasAdaptation ? 1 + packet[4] : 0);
      const table = payload + 1 + packet[payload];
      this.pmtPid = ((packet[table + 10] & 0x1f) << 8) | packet[table + 11];
      return false;
    }
    if (pid === this.pmtPid && payloadStart) {
      this.pmt = Buffer.from(packet);
      return false;
    }
    return payloadStart && hasAdaptation && packet[4] > 0 && (packet[5] & 0x40) !== 0;
  }
}
