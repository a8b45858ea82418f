/**
 * The desktops' network policies and what enforces them (docs/egress.md): the policies, kept in
 * `<home>/.egress/policies.json` (mode 0600) and in memory for the proxy to ask at every
 * connection; the egress proxy; the audit; and, per runtime, the cage that forces a desktop
 * through its gate (container-cage.ts, qemu-cage.ts).
 *
 * A desktop made with a `network` policy is caged for its whole life, whatever the policy says
 * later: its policy can then change while it runs (`PUT /svc/vms/:name/network`). A desktop made
 * without one keeps the open network of old (`{"egress": "allow"}`, no proxy) and cannot be caged
 * afterwards: its record says so.
 */
import { copyFile, mkdir, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { writeFileAtomic } from "../../common/atomic-write.js";
import type { RuntimeKind } from "../desktops/kinds.js";
import { HostError } from "../errors.js";
import type { HostLog } from "../host-log.js";
import { EgressAudit } from "./audit.js";
import { type CertificateFiles, ensureCa } from "./certificates.js";
import { CredentialInjector } from "./credentials.js";
import {
  type CompiledPolicy,
  compilePolicy,
  describePolicy,
  type NetworkPolicy,
  networkPolicySchema,
  OPEN_NETWORK,
} from "./policy.js";
import { EgressProxy } from "./proxy.js";
import { SecretStore } from "./secrets.js";

/** What a runtime does for the cage beyond the proxy (its network, and putting a change in force). */
export interface RuntimeCage {
  readonly kind: RuntimeKind;
  /** Checks that this runtime can hold the policy (a clear `HostError` when it cannot). */
  check(policy: NetworkPolicy): void;
  /** Puts a changed policy in force where the proxy alone does not (the open network on or off). */
  apply(desktop: string, policy: NetworkPolicy): Promise<void>;
  /** Where the desktop's proxy is (`host:port`, as the desktop reaches it), once known. */
  proxyAddress(desktop: string): string | null;
}

export interface EgressOptions {
  /** DNS servers the proxy resolves desktops' names with (`--egress-resolver`); default the host's. */
  resolvers?: string[];
  /** More CAs (PEM) that servers' certificates may be signed by, when the proxy adds credentials. */
  upstreamCa?: string[];
}

/** What the record of `GET /svc/vms/:name` says of the desktop's network. */
export interface NetworkRecord extends ReturnType<typeof describePolicy> {
  /** Whether the desktop goes through the egress proxy (it was made with a policy). */
  caged: boolean;
  /** The proxy's address as the desktop reaches it, when caged and known. */
  proxy: string | null;
}

const DENY_ALL = compilePolicy({ egress: "deny", dns: false });

export class EgressService {
  readonly audit: EgressAudit;
  readonly proxy: EgressProxy;
  readonly secrets: SecretStore;
  private readonly credentials: CredentialInjector;
  private readonly policies = new Map<string, CompiledPolicy>();
  private readonly cages = new Map<RuntimeKind, RuntimeCage>();
  private writes: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly directory: () => Promise<string>,
    readonly log: HostLog,
    options: EgressOptions = {},
  ) {
    this.audit = new EgressAudit(log);
    this.secrets = new SecretStore(async () => join(await directory(), "secrets.json"));
    this.credentials = new CredentialInjector({
      policyOf: (desktop) => this.policyOf(desktop),
      secrets: this.secrets,
      audit: this.audit,
      caOf: async (desktop) => ({
        ca: await this.caOf(desktop),
        leaves: join(await this.caDir(desktop), "leaves"),
      }),
      upstreamCa: options.upstreamCa,
    });
    this.proxy = new EgressProxy({
      policyOf: (desktop) => this.policyOf(desktop),
      audit: this.audit,
      resolvers: options.resolvers,
      interceptTls: (passage) => this.credentials.takerFor(passage),
    });
  }

  /**
   * The desktop's own CA (made with its cage), whose certificates the proxy answers with for the
   * domains it adds credentials to: the desktop trusts it (its runtime installs it).
   */
  async caOf(desktop: string): Promise<CertificateFiles> {
    return ensureCa(await this.caDir(desktop), `Hangar egress CA (${desktop})`);
  }

  private async caDir(desktop: string) {
    return join(await this.directory(), "ca", desktop);
  }

  /** Every secret a policy's credential rules name is set (a clear 400 for one that is not). */
  private checkSecrets(policy: NetworkPolicy) {
    const missing = (policy.credentials ?? []).map((r) => r.secret).filter((name) => !this.secrets.has(name));
    if (missing.length > 0) {
      throw new HostError(
        "invalid_params",
        `No secret named ${[...new Set(missing)].join(", ")}: set it first with POST /svc/secrets`,
      );
    }
  }

  /** The desktops whose policies name the secret. */
  usersOf(secret: string): string[] {
    return [...this.policies]
      .filter(([, compiled]) => compiled.policy.credentials?.some((rule) => rule.secret === secret))
      .map(([desktop]) => desktop);
  }

  addCage(cage: RuntimeCage) {
    this.cages.set(cage.kind, cage);
  }

  /** Reads the kept policies and secrets; once at start. */
  async load() {
    await this.secrets.load();
    const text = await readFile(await this.file(), "utf8").catch((err: NodeJS.ErrnoException) => {
      if (err.code === "ENOENT") return "{}";
      throw err;
    });
    let kept: Record<string, unknown>;
    try {
      kept = JSON.parse(text) as Record<string, unknown>;
    } catch {
      await this.log.error(
        "The egress policies file is not JSON: every caged desktop is denied all egress",
        {},
      );
      return;
    }
    for (const [desktop, value] of Object.entries(kept)) {
      const parsed = networkPolicySchema.safeParse(value);
      if (parsed.success) this.policies.set(desktop, compilePolicy(parsed.data));
      else
        await this.log.error("A kept egress policy is not valid: the desktop is denied all egress", {
          vm: desktop,
        });
    }
  }

  /** The desktop's policy as the proxy applies it (a caged desktop without one is denied everything). */
  policyOf(desktop: string): CompiledPolicy {
    return this.policies.get(desktop) ?? DENY_ALL;
  }

  /** The policy of a caged desktop, or undefined for one on the open network. */
  stored(desktop: string): NetworkPolicy | undefined {
    return this.policies.get(desktop)?.policy;
  }

  /** Cages a new desktop with `policy` (its runtime calls this as it makes it). */
  async remember(desktop: string, kind: RuntimeKind, policy: NetworkPolicy) {
    this.cageOf(kind).check(policy);
    this.checkSecrets(policy);
    this.policies.set(desktop, compilePolicy(policy));
    await this.save();
  }

  /**
   * A clone is caged as its source is, with its source's CA: a clone of a snapshot (a QEMU fork)
   * wakes trusting the CA its source installed.
   */
  async copy(source: string, target: string) {
    const policy = this.policies.get(source);
    if (!policy) return;
    const from = await this.caDir(source);
    const to = await this.caDir(target);
    await rm(to, { recursive: true, force: true });
    for (const name of ["ca.crt", "ca.key"]) {
      await mkdir(to, { recursive: true, mode: 0o700 });
      await copyFile(join(from, name), join(to, name)).catch((err: NodeJS.ErrnoException) => {
        // A source whose CA was never made: the clone makes its own.
        if (err.code !== "ENOENT") throw err;
      });
    }
    this.policies.set(target, policy);
    await this.save();
  }

  async forget(desktop: string) {
    this.audit.forget(desktop);
    this.credentials.forget(desktop);
    await rm(await this.caDir(desktop), { recursive: true, force: true });
    if (!this.policies.delete(desktop)) return;
    await this.save();
  }

  /**
   * `PUT /svc/vms/:name/network`: the caged desktop's new policy, in force for its next
   * connection. The old one stays when anything is wrong with the new one.
   */
  async change(desktop: string, kind: RuntimeKind, policy: NetworkPolicy): Promise<NetworkRecord> {
    const cage = this.cageOf(kind);
    if (!this.policies.has(desktop)) {
      throw new HostError(
        "invalid_params",
        `${desktop} was made without a network policy: it is on the open network and cannot be caged while it exists ` +
          `(make it again with "network": {...} in POST /svc/vms)`,
      );
    }
    cage.check(policy);
    this.checkSecrets(policy);
    const before = this.policies.get(desktop);
    this.policies.set(desktop, compilePolicy(policy));
    try {
      await cage.apply(desktop, policy);
      await this.save();
    } catch (err) {
      if (before) this.policies.set(desktop, before);
      await cage.apply(desktop, before?.policy ?? OPEN_NETWORK).catch(() => undefined);
      throw err;
    }
    await this.log.info("Egress policy changed", { vm: desktop, egress: JSON.stringify(policy.egress) });
    return this.record(desktop, kind);
  }

  /** The `network` of the desktop's record. */
  record(desktop: string, kind: RuntimeKind): NetworkRecord {
    const policy = this.policies.get(desktop)?.policy;
    return {
      ...describePolicy(policy ?? OPEN_NETWORK),
      caged: policy !== undefined,
      proxy: policy ? (this.cages.get(kind)?.proxyAddress(desktop) ?? null) : null,
    };
  }

  async close() {
    await this.proxy.close();
    this.credentials.close();
    await this.writes;
  }

  private cageOf(kind: RuntimeKind): RuntimeCage {
    const cage = this.cages.get(kind);
    if (!cage) {
      throw new HostError(
        "not_supported",
        `Network policies are not enforced for ${kind} desktops on this host: such a desktop would have an open network, so none is made`,
      );
    }
    return cage;
  }

  private async file() {
    return join(await this.directory(), "policies.json");
  }

  private save(): Promise<void> {
    const write = this.writes.then(async () => {
      const file = await this.file();
      await mkdir(join(file, ".."), { recursive: true, mode: 0o700 });
      const all = Object.fromEntries(
        [...this.policies].map(([desktop, compiled]) => [desktop, compiled.policy]),
      );
      await writeFileAtomic(file, `${JSON.stringify(all, null, 2)}\n`, { mode: 0o600 });
    });
    this.writes = write.catch(() => undefined);
    return write;
  }
}
