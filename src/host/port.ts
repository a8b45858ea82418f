/** The host service's port (lume's), kept apart so that the CLI names it without loading the service. */
export const DEFAULT_HOST_PORT = 7777;
