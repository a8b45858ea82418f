/**
 * The live view's H.264 stream, decoded with WebCodecs: each packet of `WS /live` (after a `stream`
 * message saying how to decode) goes to a `VideoDecoder` configured for low latency, and each frame
 * it gives back is drawn on the canvas at once; there is no buffer in between, so a change on the
 * desktop is on the page as soon as it is decoded. AAC packets go to an `AudioDecoder` and play
 * through Web Audio about 80 ms behind (enough to bridge the gaps between packets).
 *
 * WebCodecs needs a secure context (https, or the server on localhost): elsewhere, and when the
 * browser cannot decode the stream, the live view keeps JPEG frames.
 */

/** How the server says to decode the stream (`{"type": "stream"}`). */
export interface StreamMessage {
  video: { codec: string; description: string; width: number; height: number };
  audio?: { codec: string; description: string; sampleRate: number; channels: number };
  screenWidth: number;
  screenHeight: number;
  generation: number;
}

/** Packet flags of the binary frames. */
const AUDIO = 1;
const KEY = 2;
const HEADER = 9;
/** How far behind real time the sound plays, and the most it may lag before it is cut back. */
const AUDIO_DELAY_S = 0.08;
const AUDIO_LAG_LIMIT_S = 0.4;
/** Samples of sound kept for the page's tests (about one second). */
const KEPT_SAMPLES = 48_000;

/** Whether this page can play the H.264 stream at all. */
export function canDecodeH264(): boolean {
  return typeof VideoDecoder !== "undefined" && window.isSecureContext;
}

export class StreamPlayer {
  private video?: VideoDecoder;
  private sound?: AudioDecoder;
  private context?: AudioContext;
  private nextSound = 0;
  private waitingForKey = true;
  /** Packets that came while the decoders were being configured, played once they are. */
  private queued: ArrayBuffer[] | undefined;
  /** The last second of decoded sound, mixed to one channel (the tests read it). */
  readonly recentSound = new Float32Array(KEPT_SAMPLES);
  private soundAt = 0;
  soundRate = 0;
  /** Frames drawn, packets in (the tests and the status read them). */
  frames = 0;
  packets = 0;

  constructor(
    private readonly canvas: HTMLCanvasElement,
    private readonly onFrame: () => void,
    private readonly onError: (message: string) => void,
  ) {}

  /**
   * (Re)configures the decoders for a stream that starts; rejects when this browser cannot decode it.
   * Packets given meanwhile wait, and are decoded once it is done.
   */
  async configure(message: StreamMessage, audioContext?: AudioContext) {
    this.close();
    this.queued = [];
    try {
      await this.setUp(message, audioContext);
    } finally {
      const queued = this.queued;
      this.queued = undefined;
      for (const packet of queued ?? []) this.packet(packet);
    }
  }

  private async setUp(message: StreamMessage, audioContext?: AudioContext) {
    const video: VideoDecoderConfig = {
      codec: message.video.codec,
      description: base64Bytes(message.video.description),
      codedWidth: message.video.width,
      codedHeight: message.video.height,
      optimizeForLatency: true,
    };
    if (!(await VideoDecoder.isConfigSupported(video)).supported) {
      throw new Error(`this browser cannot decode ${message.video.codec}`);
    }
    this.waitingForKey = true;
    this.video = new VideoDecoder({
      output: (frame) => this.draw(frame),
      error: (err) => this.onError(`the video decoder failed: ${err.message}`),
    });
    this.video.configure(video);
    this.context = audioContext;
    if (message.audio && audioContext && typeof AudioDecoder !== "undefined") {
      const audio: AudioDecoderConfig = {
        codec: message.audio.codec,
        description: base64Bytes(message.audio.description),
        sampleRate: message.audio.sampleRate,
        numberOfChannels: message.audio.channels,
      };
      if ((await AudioDecoder.isConfigSupported(audio)).supported) {
        this.soundRate = message.audio.sampleRate;
        this.sound = new AudioDecoder({
          output: (data) => this.play(data),
          error: () => this.closeSound(),
        });
        this.sound.configure(audio);
      }
    }
  }

  /** One binary frame of the socket: a flags byte, the time in ms (float64), the packet. */
  packet(buffer: ArrayBuffer) {
    if (this.queued) {
      this.queued.push(buffer);
      return;
    }
    if (buffer.byteLength <= HEADER || !this.video || this.video.state !== "configured") return;
    const view = new DataView(buffer);
    const flags = view.getUint8(0);
    const timestamp = Math.round(view.getFloat64(1) * 1000);
    const data = new Uint8Array(buffer, HEADER);
    this.packets++;
    if (flags & AUDIO) {
      if (this.sound?.state === "configured")
        this.sound.decode(new EncodedAudioChunk({ type: "key", timestamp, data }));
      return;
    }
    const key = (flags & KEY) !== 0;
    if (this.waitingForKey && !key) return;
    this.waitingForKey = false;
    this.video.decode(new EncodedVideoChunk({ type: key ? "key" : "delta", timestamp, data }));
  }

  close() {
    this.queued = undefined;
    if (this.video && this.video.state !== "closed") this.video.close();
    this.video = undefined;
    this.closeSound();
  }

  private closeSound() {
    if (this.sound && this.sound.state !== "closed") this.sound.close();
    this.sound = undefined;
  }

  private draw(frame: VideoFrame) {
    if (this.canvas.width !== frame.displayWidth || this.canvas.height !== frame.displayHeight) {
      this.canvas.width = frame.displayWidth;
      this.canvas.height = frame.displayHeight;
    }
    this.canvas.getContext("2d")!.drawImage(frame, 0, 0);
    frame.close();
    this.frames++;
    this.onFrame();
  }

  /** Schedules decoded sound just behind real time; keeps a copy for the tests. */
  private play(data: AudioData) {
    const context = this.context;
    if (!context) return data.close();
    const frames = data.numberOfFrames;
    const buffer = context.createBuffer(data.numberOfChannels, frames, data.sampleRate);
    for (let channel = 0; channel < data.numberOfChannels; channel++) {
      const plane = new Float32Array(frames);
      data.copyTo(plane, { planeIndex: channel, format: "f32-planar" });
      buffer.copyToChannel(plane, channel);
      if (channel === 0) this.keep(plane);
    }
    data.close();
    const now = context.currentTime;
    if (this.nextSound < now || this.nextSound > now + AUDIO_LAG_LIMIT_S)
      this.nextSound = now + AUDIO_DELAY_S;
    const source = context.createBufferSource();
    source.buffer = buffer;
    source.connect(context.destination);
    source.start(this.nextSound);
    this.nextSound += buffer.duration;
  }

  private keep(samples: Float32Array) {
    for (const sample of samples) {
      this.recentSound[this.soundAt] = sample;
      this.soundAt = (this.soundAt + 1) % KEPT_SAMPLES;
    }
  }

  /** The kept sound, oldest first. */
  soundSamples(): Float32Array {
    const out = new Float32Array(KEPT_SAMPLES);
    out.set(this.recentSound.subarray(this.soundAt), 0);
    out.set(this.recentSound.subarray(0, this.soundAt), KEPT_SAMPLES - this.soundAt);
    return out;
  }
}

function base64Bytes(text: string): Uint8Array {
  return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
}
