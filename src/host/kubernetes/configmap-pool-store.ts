/**
 * Pools kept in the cluster: one ConfigMap (`hangar-pools`) in the desktops' namespace holds the
 * pools and their members as JSON (the file store's shape), so that a host service that comes back
 * somewhere else (its Pod rescheduled, with no disk of its own) finds its pools, their claims and
 * their half-started desktops, as a restarted one finds its file. Every change is a replace with
 * the version last read: a change made meanwhile by another writer makes it fail (409), and the
 * change is made again on what is there now; so a claim never hands out a desktop claimed elsewhere.
 */
import type { V1ConfigMap } from "@kubernetes/client-node";
import { HostError } from "../errors.js";
import { type Edit, EditingPoolStore, poolSnapshotSchema } from "../pools/pool-edits.js";
import type { PoolSnapshot } from "../pools/pool-store.js";
import { type Cluster, clusterError, statusCode } from "./cluster.js";
import { LABEL, MANAGER } from "./objects.js";

export const POOLS_CONFIGMAP = "hangar-pools";
const KEY = "pools.json";
const MAX_TRIES = 20;

export class ConfigMapPoolStore extends EditingPoolStore {
  private last?: { configMap: V1ConfigMap | undefined; snapshot: PoolSnapshot };
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly cluster: Cluster,
    readonly name = POOLS_CONFIGMAP,
  ) {
    super();
  }

  async load(): Promise<PoolSnapshot> {
    return structuredClone((await this.read()).snapshot);
  }

  async close() {
    await this.queue.catch(() => undefined);
  }

  /** Applies `edit` to the state last read and writes it; on a lost race, reads again and applies it again. */
  protected change<T>(edit: Edit<T>): Promise<T> {
    const next = this.queue
      .catch(() => undefined)
      .then(async () => {
        let current = this.last ?? (await this.read());
        for (let attempt = 1; ; attempt++) {
          const copy = structuredClone(current.snapshot);
          const result = edit(copy);
          try {
            await this.write(current.configMap, copy);
            return result;
          } catch (err) {
            if (statusCode(err) !== 409 || attempt >= MAX_TRIES) {
              if (err instanceof HostError) throw err;
              throw clusterError(err, this.cluster, `saving the pools (ConfigMap ${this.name})`);
            }
            current = await this.read();
          }
        }
      });
    this.queue = next;
    return next;
  }

  private async write(configMap: V1ConfigMap | undefined, snapshot: PoolSnapshot) {
    const { core, namespace } = this.cluster;
    const data = { [KEY]: `${JSON.stringify(snapshot)}\n` };
    const written = configMap
      ? await core.replaceNamespacedConfigMap({ name: this.name, namespace, body: { ...configMap, data } })
      : await core.createNamespacedConfigMap({
          namespace,
          body: { metadata: { name: this.name, labels: { [LABEL.managedBy]: MANAGER } }, data },
        });
    this.last = { configMap: written, snapshot };
  }

  private async read(): Promise<{ configMap: V1ConfigMap | undefined; snapshot: PoolSnapshot }> {
    const { core, namespace } = this.cluster;
    let configMap: V1ConfigMap | undefined;
    try {
      configMap = await core.readNamespacedConfigMap({ name: this.name, namespace });
    } catch (err) {
      if (statusCode(err) !== 404)
        throw clusterError(err, this.cluster, `reading the pools (ConfigMap ${this.name})`);
    }
    const text = configMap?.data?.[KEY];
    let snapshot: PoolSnapshot = { pools: [], members: [] };
    if (text) {
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        throw new Error(
          `The ConfigMap ${namespace}/${this.name} does not hold valid JSON in ${KEY}: fix or delete it`,
        );
      }
      const checked = poolSnapshotSchema.safeParse(parsed);
      if (!checked.success) {
        throw new Error(
          `The ConfigMap ${namespace}/${this.name} is not as expected (${checked.error.issues[0]?.path.join(".")}: ` +
            `${checked.error.issues[0]?.message}): fix or delete it`,
        );
      }
      snapshot = checked.data;
    }
    this.last = { configMap, snapshot };
    return this.last;
  }
}
