/**
 * The cluster objects a Kubernetes desktop is made of, and how Hangar finds them again (the
 * cluster is the record: a restarted host service, or another one, reads everything back).
 *
 * - A **Secret** `hangar-<name>` is the desktop itself: its labels say it is a Hangar desktop
 *   and which, its annotations hold what it is made of (image, cpu, memory, display, disk), its
 *   data holds its secrets (the VNC password, its API key in cloud mode). It exists from
 *   `create` to `delete`, running or not.
 * - A **Pod** `hangar-<name>` exists while the desktop runs (`run` makes it, `stop` deletes it).
 *   It is owned by the Secret (an owner reference), so deleting the desktop deletes it even when
 *   the host service is killed half-way. One Pod name per desktop: the API server refuses a
 *   second, so two host services never run one desktop twice.
 * - A **PersistentVolumeClaim** `hangar-<name>-home`, only when the desktop asks for a disk that
 *   outlives its Pod (`storage: "persistent"`): its home directory. Owned by the Secret too.
 * - One **NetworkPolicy** per namespace, `hangar-desktops`: desktops take connections only from
 *   the host service's Pods and from Pods labelled `hangar.dev/client: "true"`.
 */
import type { V1NetworkPolicy, V1Pod, V1Secret } from "@kubernetes/client-node";
import type { PodCage } from "../egress/kubernetes-cage.js";
import { HostError } from "../errors.js";

export const LABEL = {
  /** The desktop's name; on every object of a desktop. */
  desktop: "hangar.dev/desktop",
  /** Which object of the desktop it is: `desktop` (the Secret), `pod`, `home` (the claim). */
  part: "hangar.dev/part",
  managedBy: "app.kubernetes.io/managed-by",
  appName: "app.kubernetes.io/name",
  /** On a Pod allowed to reach desktops (besides the host service's own). */
  client: "hangar.dev/client",
  /** On the host service's own Pods (deploy/kubernetes/host/deployment.yaml). */
  hostComponent: "app.kubernetes.io/component",
} as const;

export const ANNOTATION = {
  /** Set while the desktop sleeps with its Pod gone (its home on its claim): when it went. */
  hibernatedAt: "hangar.dev/hibernated-at",
  image: "hangar.dev/image",
  cpu: "hangar.dev/cpu",
  memory: "hangar.dev/memory",
  display: "hangar.dev/display",
  diskSize: "hangar.dev/disk-size",
  /** "true" when the desktop's home is a PersistentVolumeClaim. */
  persistent: "hangar.dev/persistent",
  /** "true" when the desktop has an API key of its own (its computer server in cloud mode). */
  keyed: "hangar.dev/keyed",
  /** "true": made with a network policy; every Pod of it is caged (egress/kubernetes-cage.ts). */
  caged: "hangar.dev/caged",
  /**
   * "true": the service's desktop image, whose entry point starts as root, keeps the computer server
   * root and runs the agent's processes as the desktop user (Pod Security `baseline`).
   */
  commandUser: "hangar.dev/command-user",
  /** The host service that made it (for people reading `kubectl get -o yaml`). */
  createdBy: "hangar.dev/created-by",
} as const;

export const MANAGER = "hangar";
export const HOST_COMPONENT = "hangar-host";
export const NETWORK_POLICY = "hangar-desktops";
export const SECRET_KEYS = { vncPassword: "vnc-password", apiKeys: "api-keys" } as const;
export const SECRETS_MOUNT = "/run/secrets/hangar";
/** The computer server (plain HTTP: the relay is on loopback, and in the cluster the NetworkPolicy guards it) and noVNC. */
export const SERVER_PORT = 8000;
export const NOVNC_PORT = 6080;
export const CONTAINER = "desktop";
const PREFIX = "hangar-";
/** A desktop name must leave room for `hangar-` and `-home` in a 63-character name. */
export const MAX_DESKTOP_NAME = 50;

/** Where desktops are, for lume's `locationName` and `storage`: in the Pod only, or with a disk that outlives it. */
export const LOCATION = { ephemeral: "kubernetes", persistent: "persistent" } as const;

export function objectName(desktop: string): string {
  return `${PREFIX}${desktop}`;
}

export function claimName(desktop: string): string {
  return `${PREFIX}${desktop}-home`;
}

/** Kubernetes names are DNS-1123 labels: a desktop name must be one too (lowercase, digits, '-'). */
export function checkDesktopName(name: string): string {
  if (name.length > MAX_DESKTOP_NAME || !/^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/.test(name)) {
    throw new HostError(
      "invalid_params",
      `Invalid name for a Kubernetes desktop '${name}': use lowercase letters, digits and '-' ` +
        `(starting and ending with a letter or digit), at most ${MAX_DESKTOP_NAME} characters`,
    );
  }
  return name;
}

/** What a desktop is made of, as its Secret's annotations keep it. */
export interface DesktopSpec {
  name: string;
  image: string;
  /** Whole CPUs. */
  cpu: number;
  /** Bytes. */
  memory: number;
  display: string;
  /** Bytes: the home directory's size (an emptyDir's limit, or the claim's request). */
  diskSize: number;
  persistent: boolean;
  keyed: boolean;
  /** Made with a network policy: its Pods go through an egress gate. */
  caged: boolean;
  /**
   * Its Pods start the image's entry point as root with the capabilities to switch users: the
   * computer server stays root, the agent's processes are the desktop user's (`desktopPod`).
   */
  commandUser: boolean;
}

export function specOf(secret: V1Secret): DesktopSpec {
  const a = secret.metadata?.annotations ?? {};
  return {
    name: secret.metadata?.labels?.[LABEL.desktop] ?? "",
    image: a[ANNOTATION.image] ?? "",
    cpu: Number(a[ANNOTATION.cpu] ?? 1) || 1,
    memory: Number(a[ANNOTATION.memory] ?? 0) || 0,
    display: a[ANNOTATION.display] ?? "1280x800",
    diskSize: Number(a[ANNOTATION.diskSize] ?? 0) || 0,
    persistent: a[ANNOTATION.persistent] === "true",
    keyed: a[ANNOTATION.keyed] === "true",
    caged: a[ANNOTATION.caged] === "true",
    commandUser: a[ANNOTATION.commandUser] === "true",
  };
}

function labels(desktop: string, part: string): Record<string, string> {
  return {
    [LABEL.desktop]: desktop,
    [LABEL.part]: part,
    [LABEL.managedBy]: MANAGER,
    [LABEL.appName]: "hangar-desktop",
  };
}

export function specAnnotations(spec: DesktopSpec, createdBy: string): Record<string, string> {
  return {
    [ANNOTATION.image]: spec.image,
    [ANNOTATION.cpu]: String(spec.cpu),
    [ANNOTATION.memory]: String(spec.memory),
    [ANNOTATION.display]: spec.display,
    [ANNOTATION.diskSize]: String(spec.diskSize),
    [ANNOTATION.persistent]: String(spec.persistent),
    [ANNOTATION.keyed]: String(spec.keyed),
    ...(spec.caged && { [ANNOTATION.caged]: "true" }),
    ...(spec.commandUser && { [ANNOTATION.commandUser]: "true" }),
    [ANNOTATION.createdBy]: createdBy,
  };
}

/** The desktop's Secret: the desktop itself (see above), with its secrets as data. */
export function desktopSecret(
  spec: DesktopSpec,
  secrets: Record<string, string>,
  createdBy: string,
): V1Secret {
  return {
    apiVersion: "v1",
    kind: "Secret",
    metadata: {
      name: objectName(spec.name),
      labels: labels(spec.name, "desktop"),
      annotations: specAnnotations(spec, createdBy),
    },
    type: "Opaque",
    stringData: secrets,
  };
}

function ownedBy(secret: V1Secret) {
  return [
    {
      apiVersion: "v1",
      kind: "Secret",
      name: secret.metadata?.name ?? "",
      uid: secret.metadata?.uid ?? "",
      blockOwnerDeletion: true,
    },
  ];
}

/** The home directory's claim, for a desktop whose disk outlives its Pods. */
export function homeClaim(secret: V1Secret) {
  const spec = specOf(secret);
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: {
      name: claimName(spec.name),
      labels: labels(spec.name, "home"),
      ownerReferences: ownedBy(secret),
    },
    spec: {
      accessModes: ["ReadWriteOnce"],
      resources: { requests: { storage: String(spec.diskSize) } },
    },
  };
}

/**
 * What the root entry point needs to run the agent as the desktop user (all within Pod Security
 * `baseline`): switch to that user (`SETUID`, `SETGID`), signal its processes (`KILL`: a command's
 * timeout ends its group), give it its home (`CHOWN`) and reach its sockets and files as the
 * server must (`DAC_OVERRIDE`, `FOWNER`).
 */
const COMMAND_USER_CAPABILITIES = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETGID", "SETUID"];

/**
 * The desktop's Pod: the image's entry point (the computer server on 8000, noVNC on 6080) as uid
 * 10001 (or, with `commandUser`, as root with the capabilities above, the agent as uid 10001), no privilege, no service account token, a read-only root with writable scratch space
 * (/tmp, the X socket directory, the home, /dev/shm for Chromium), the secrets as read-only files,
 * and a readiness probe on the computer server's `/status`.
 */
export function desktopPod(secret: V1Secret, graceSeconds: number, cage?: PodCage): V1Pod {
  const spec = specOf(secret);
  const cpu = String(spec.cpu);
  const memory = String(spec.memory);
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: objectName(spec.name),
      labels: labels(spec.name, "pod"),
      annotations: { [ANNOTATION.image]: spec.image, ...cage?.annotations },
      ownerReferences: ownedBy(secret),
    },
    spec: {
      restartPolicy: "Never",
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      terminationGracePeriodSeconds: graceSeconds,
      hostname: spec.name,
      // A caged desktop's DNS is its gate, and its filter is set before it starts.
      ...(cage && {
        dnsPolicy: "None",
        dnsConfig: cage.dnsConfig,
        initContainers: [{ ...cage.initContainer, image: spec.image, imagePullPolicy: "IfNotPresent" }],
      }),
      securityContext: spec.commandUser
        ? // Root without most of its power (the capabilities below), no file-system group: the
          // secrets and the server's state are root's alone, the agent (uid 10001) reaches neither.
          { runAsNonRoot: false, runAsUser: 0, runAsGroup: 0, seccompProfile: { type: "RuntimeDefault" } }
        : {
            runAsNonRoot: true,
            runAsUser: 10001,
            runAsGroup: 10001,
            fsGroup: 10001,
            seccompProfile: { type: "RuntimeDefault" },
          },
      containers: [
        {
          name: CONTAINER,
          image: spec.image,
          imagePullPolicy: "IfNotPresent",
          args: spec.keyed ? ["--insecure-http"] : [],
          env: [
            // The computer server listens on every address of the Pod: it answers only to loopback
            // names (the relay) and the Pod's own IP in `Host`, so a page of another site resolving
            // its name to one of those (DNS rebinding) is refused.
            { name: "POD_IP", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } },
            { name: "HANGAR_ALLOW_HOSTS", value: "$(POD_IP)" },
            { name: "HANGAR_DISPLAY", value: spec.display },
            { name: "CONTAINER_NAME", value: spec.name },
            { name: "HANGAR_VNC", value: "1" },
            { name: "HANGAR_VNC_PASSWORD_FILE", value: `${SECRETS_MOUNT}/${SECRET_KEYS.vncPassword}` },
            ...(cage?.env ?? []),
          ],
          ports: [
            { name: "computer", containerPort: SERVER_PORT, protocol: "TCP" },
            { name: "novnc", containerPort: NOVNC_PORT, protocol: "TCP" },
          ],
          readinessProbe: {
            httpGet: { path: "/status", port: SERVER_PORT },
            periodSeconds: 1,
            timeoutSeconds: 2,
            failureThreshold: 3,
          },
          resources: {
            requests: {
              cpu: spec.cpu > 1 ? "1" : "100m",
              memory: String(Math.min(spec.memory, 256 * 1024 ** 2)),
            },
            limits: { cpu, memory },
          },
          securityContext: {
            allowPrivilegeEscalation: false,
            readOnlyRootFilesystem: true,
            capabilities: { drop: ["ALL"], ...(spec.commandUser && { add: COMMAND_USER_CAPABILITIES }) },
          },
          volumeMounts: [
            { name: "tmp", mountPath: "/tmp" },
            { name: "x11-sockets", mountPath: "/tmp/.X11-unix" },
            { name: "home", mountPath: "/home/hangar" },
            { name: "shm", mountPath: "/dev/shm" },
            { name: "secrets", mountPath: SECRETS_MOUNT, readOnly: true },
            ...(cage?.volumeMounts ?? []),
          ],
        },
      ],
      volumes: [
        { name: "tmp", emptyDir: { medium: "Memory", sizeLimit: "512Mi" } },
        { name: "x11-sockets", emptyDir: { medium: "Memory", sizeLimit: "1Mi" } },
        spec.persistent
          ? { name: "home", persistentVolumeClaim: { claimName: claimName(spec.name) } }
          : { name: "home", emptyDir: { sizeLimit: String(spec.diskSize) } },
        { name: "shm", emptyDir: { medium: "Memory", sizeLimit: "256Mi" } },
        {
          name: "secrets",
          secret: {
            secretName: objectName(spec.name),
            // Root's alone with a command user; else the desktop's user reads them (its fsGroup).
            defaultMode: spec.commandUser ? 0o400 : 0o440,
            items: [
              { key: SECRET_KEYS.vncPassword, path: SECRET_KEYS.vncPassword },
              ...(spec.keyed ? [{ key: SECRET_KEYS.apiKeys, path: SECRET_KEYS.apiKeys }] : []),
            ],
          },
        },
        ...(cage?.volumes ?? []),
      ],
    },
  };
}

/**
 * The namespace's NetworkPolicy: desktops take connections on the computer server's and noVNC's
 * ports only from the host service's Pods and from Pods labelled `hangar.dev/client: "true"` (an
 * agent harness in the cluster). Port-forwards through the API server (the host service's relay)
 * do not pass through the Pod network and are not affected.
 */
export function desktopNetworkPolicy(): V1NetworkPolicy {
  const ports = [
    { port: SERVER_PORT, protocol: "TCP" },
    { port: NOVNC_PORT, protocol: "TCP" },
  ];
  return {
    apiVersion: "networking.k8s.io/v1",
    kind: "NetworkPolicy",
    metadata: { name: NETWORK_POLICY, labels: { [LABEL.managedBy]: MANAGER } },
    spec: {
      podSelector: { matchLabels: { [LABEL.managedBy]: MANAGER, [LABEL.appName]: "hangar-desktop" } },
      policyTypes: ["Ingress"],
      ingress: [
        {
          _from: [
            { podSelector: { matchLabels: { [LABEL.hostComponent]: HOST_COMPONENT } } },
            { podSelector: { matchLabels: { [LABEL.client]: "true" } } },
          ],
          ports,
        },
      ],
    },
  };
}
