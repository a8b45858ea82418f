/** VM images in lume's OCI format: pull, push, and the local image cache. */
export { type Credentials, credentialsFromEnv } from "./auth.js";
export { allocatedBytes, type CachedImage, ImageCache } from "./cache.js";
export { RegistryClient } from "./client.js";
export { type PullOptions, type PullProgress, type PullResult, pullImage } from "./pull.js";
export { type PushOptions, type PushProgress, type PushResult, pushVm } from "./push.js";
export {
  checkImageName,
  checkOrganization,
  checkTag,
  DEFAULT_ORGANIZATION,
  DEFAULT_REGISTRY,
  parseImageReference,
  registryBaseUrl,
} from "./reference.js";
