/** The environment's names for API keys, apart so that the launcher (cli/launcher.ts) loads nothing else. */

/** The environment variable holding comma-separated API keys (or `sha256:` digests). */
export const API_KEYS_ENV = "HANGAR_API_KEYS";
/** Set by a launcher that hands `HANGAR_API_KEYS` over a pipe: the descriptor to read them from. */
export const API_KEYS_FD_ENV = "HANGAR_API_KEYS_FD";
