/**
 * What the cluster has, kept current by a watch (an informer: list once, then watch from that
 * version), never by polling. One view per kind of object (the desktops' Secrets, their Pods),
 * selected by Hangar's labels. The host service's own writes are put in at once (read your
 * writes); the watch's later events replace them by version, and an object deleted here is not
 * brought back by an older event.
 *
 * A watch that breaks (the API server restarted, the network) is started again, 1 s then up to
 * 10 s apart; starting again lists first when the version is too old, so objects deleted
 * meanwhile are dropped. `start` resolves once the first list is in, or rejects with the first
 * failure (a Role without list/watch), so a service never serves an empty view as if it were true.
 */
import {
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  makeInformer,
} from "@kubernetes/client-node";

const MAX_GONE = 10_000;

export interface ViewEvents<T> {
  /** An object was added, changed or deleted (deleted: `gone` true). */
  changed(object: T, gone: boolean): void;
  /** The watch broke (with the reason) or came back (null). */
  watchState(error: unknown | null): void;
}

export class ClusterView<T extends KubernetesObject> {
  private readonly objects = new Map<string, T>();
  /** Uids deleted by this service or by the watch: later events of them are old news. */
  private readonly gone = new Set<string>();
  private readonly informer;
  private closed = false;
  private timer?: NodeJS.Timeout;
  private wait = 1000;
  private broken = false;
  private watching = false;

  constructor(
    config: KubeConfig,
    path: string,
    list: () => Promise<KubernetesListObject<T>>,
    labelSelector: string,
    private readonly events: ViewEvents<T>,
  ) {
    this.informer = makeInformer<T>(config, path, list, labelSelector);
    const put = (object: T) => this.put(object);
    this.informer.on("add", put);
    this.informer.on("update", put);
    this.informer.on("delete", (object: T) => this.drop(object));
    this.informer.on("connect", () => {
      if (this.broken) {
        this.broken = false;
        this.events.watchState(null);
      }
    });
  }

  /** Lists, then watches; rejects with the first failure (and can be called again then). */
  async start(): Promise<void> {
    if (this.watching) return;
    let failure: unknown;
    const first = (err: unknown) => {
      failure ??= err ?? new Error("the watch ended");
    };
    this.informer.on("error", first);
    await this.informer.start();
    this.informer.off("error", first);
    if (failure !== undefined) {
      await this.informer.stop();
      throw failure;
    }
    this.watching = true;
    this.informer.on("error", (err: unknown) => this.restart(err));
  }

  async close() {
    this.closed = true;
    clearTimeout(this.timer);
    await this.informer.stop();
  }

  get(name: string): T | undefined {
    return this.objects.get(name);
  }

  list(): T[] {
    return [...this.objects.values()];
  }

  /** Puts in an object this service wrote (or the watch saw), unless a newer version is in. */
  put(object: T) {
    const name = object.metadata?.name;
    const uid = object.metadata?.uid;
    if (!name || (uid && this.gone.has(uid))) return;
    const current = this.objects.get(name);
    if (current && current.metadata?.uid === uid && newer(current, object)) return;
    this.objects.set(name, object);
    this.events.changed(object, false);
  }

  /** Takes out an object deleted (by this service, or seen deleted by the watch). */
  drop(object: T) {
    const name = object.metadata?.name;
    const uid = object.metadata?.uid;
    if (uid) {
      this.gone.add(uid);
      // Old news stops coming soon after a delete: the oldest thousands are forgotten.
      if (this.gone.size > MAX_GONE) this.gone.delete(this.gone.values().next().value as string);
    }
    if (!name) return;
    const current = this.objects.get(name);
    if (current && uid && current.metadata?.uid !== uid) return;
    this.objects.delete(name);
    this.events.changed(object, true);
  }

  private restart(err: unknown) {
    if (this.closed) return;
    if (!this.broken) {
      this.broken = true;
      this.events.watchState(err);
    }
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      if (this.closed) return;
      this.wait = Math.min(10_000, this.wait * 2);
      void this.informer.start().then(() => {
        if (!this.broken) this.wait = 1000;
      });
    }, this.wait);
    this.timer.unref();
  }
}

/** Whether `a` is a later version than `b` (resource versions are etcd revisions: numbers). */
function newer(a: KubernetesObject, b: KubernetesObject): boolean {
  const va = Number(a.metadata?.resourceVersion);
  const vb = Number(b.metadata?.resourceVersion);
  return Number.isFinite(va) && Number.isFinite(vb) && va > vb;
}
