/**
 * What transports, the timeline and the recorder learn of a command without knowing its name, as
 * Playwright's protocol metainfo marks its methods: set on the command's definition.
 */
export interface CommandFlags {
  /**
   * Pointer and keyboard commands share one queue so that two clients never interleave; a person in
   * control of the console's live view may send them.
   */
  readonly input?: boolean;
  /**
   * Goes to a point: the timeline draws where (its `x`/`y`, `coordinate`, or the end of its `path`,
   * in screen pixels).
   */
  readonly pointer?: boolean;
  /**
   * Its result is a picture of the screen (`image_data` as bytes, `format`, `width`, `height`,
   * `scale`; the corner of its `region` parameter is the picture's origin): the timeline keeps it, to
   * show what the agent saw.
   */
  readonly capture?: boolean;
  /**
   * Parameters that model hosts' clients (MCP) get by default, where the caller gives none: a
   * screenshot fitted to the size models accept, for one.
   */
  readonly modelDefaults?: Readonly<Record<string, unknown>>;
}
