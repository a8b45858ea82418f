/**
 * A desktop's network policy (docs/egress.md): where it may connect, whether its DNS answers, and
 * which credentials the egress proxy adds on its way out. One zod schema checks it wherever it is
 * given (`network` of `POST /svc/vms`, `PUT /svc/vms/:name/network`, a pool); `compilePolicy`
 * turns it into the matcher the proxy asks for every connection.
 *
 * An allow entry is a domain (`example.com`, `*.example.com` for its subdomains), an address or
 * CIDR (`203.0.113.7`, `198.51.100.0/24`, `2001:db8::/32`), each with an optional port
 * (`example.com:443`, `198.51.100.0/24:5432`, `[2001:db8::1]:443`).
 */
import { BlockList, isIP } from "node:net";
import { z } from "zod";

/** The most allow entries and credential rules one policy holds. */
export const MAX_ALLOW_ENTRIES = 256;
export const MAX_CREDENTIAL_RULES = 64;

/** A secret's name, as `POST /svc/secrets` takes it and a credential rule names it. */
export const SECRET_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

/** What one allow entry says, once parsed. */
export type AllowEntry =
  | { kind: "domain"; text: string; name: string; wildcard: boolean; port?: number }
  | { kind: "address"; text: string; address: string; prefix: number; family: 4 | 6; port?: number };

const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;

/** Parses one allow entry; a sentence naming what is wrong when it is not one. */
export function parseAllowEntry(text: string): AllowEntry | string {
  const entry = text.trim().toLowerCase();
  if (entry === "") return "an empty entry";
  let host = entry;
  let port: number | undefined;
  const bracketed = /^\[([0-9a-f:.]+)\](?:\/(\d{1,3}))?(?::(\d+))?$/.exec(entry);
  if (bracketed) {
    host = bracketed[2] === undefined ? bracketed[1] : `${bracketed[1]}/${bracketed[2]}`;
    if (bracketed[3] !== undefined) port = Number(bracketed[3]);
  } else if ((entry.match(/:/g) ?? []).length === 1) {
    const at = entry.lastIndexOf(":");
    host = entry.slice(0, at);
    const portText = entry.slice(at + 1);
    if (!/^\d{1,5}$/.test(portText)) return `'${text}': the port '${portText}' is not a number`;
    port = Number(portText);
  }
  if (port !== undefined && (port < 1 || port > 65535)) return `'${text}': a port is from 1 to 65535`;
  const [address, prefixText, ...more] = host.split("/");
  const family = isIP(address);
  if (family !== 0) {
    if (more.length > 0) return `'${text}' is not an address or CIDR`;
    const full = family === 4 ? 32 : 128;
    const prefix = prefixText === undefined ? full : Number(prefixText);
    if (!/^\d{1,3}$/.test(prefixText ?? "0") || prefix > full) {
      return `'${text}': the prefix length of an IPv${family} CIDR is from 0 to ${full}`;
    }
    return { kind: "address", text, address, prefix, family: family as 4 | 6, ...(port && { port }) };
  }
  if (prefixText !== undefined || /^[\d.]+$/.test(host) || host.includes(":")) {
    return `'${text}' is not a valid IP address or CIDR`;
  }
  const wildcard = host.startsWith("*.");
  const name = wildcard ? host.slice(2) : host;
  const labels = name.split(".");
  if (name.length > 253 || !labels.every((label) => LABEL.test(label))) {
    return `'${text}' is not a valid domain (letters, digits and hyphens in dot-separated labels; '*.' only as the first label)`;
  }
  if (wildcard && labels.length < 2)
    return `'${text}': a wildcard needs a domain under it, e.g. *.example.com`;
  return { kind: "domain", text, name, wildcard, ...(port && { port }) };
}

const allowEntry = z.string().superRefine((text, ctx) => {
  const parsed = parseAllowEntry(text);
  if (typeof parsed === "string") ctx.addIssue({ code: "custom", message: parsed });
});

const headerName = z
  .string()
  .regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$/, { error: "expected an HTTP header name" })
  .refine((h) => !/^(host|content-length|transfer-encoding|connection|upgrade|proxy-.*)$/i.test(h), {
    error: "this header is the proxy's own and cannot be set",
  });

/**
 * A credential rule: to requests for `domain` the proxy adds `header: value`, where `{secret}` in
 * `value` is the secret's value (default `Authorization: Bearer {secret}`).
 */
export const credentialRuleSchema = z.strictObject({
  domain: z.string().superRefine((text, ctx) => {
    const parsed = parseAllowEntry(text);
    if (typeof parsed === "string") ctx.addIssue({ code: "custom", message: parsed });
    else if (parsed.kind !== "domain" || parsed.port !== undefined) {
      ctx.addIssue({
        code: "custom",
        message: `'${text}': a credential rule names a domain, without a port`,
      });
    }
  }),
  secret: z.string().regex(SECRET_NAME, { error: "expected a secret's name (letters, digits, _ . -)" }),
  header: headerName.optional(),
  value: z
    .string()
    .max(1024)
    .refine((v) => v.includes("{secret}"), { error: "the value must hold {secret}" })
    .refine((v) => !/[\r\n]/.test(v), { error: "the value must be one line" })
    .optional(),
});
export type CredentialRule = z.infer<typeof credentialRuleSchema>;

export const networkPolicySchema = z
  .strictObject({
    egress: z.union(
      [z.enum(["deny", "allow"]), z.strictObject({ allow: z.array(allowEntry).max(MAX_ALLOW_ENTRIES) })],
      { error: `expected "deny", "allow" or {"allow": [domains, addresses, CIDRs]}` },
    ),
    /** Whether the desktop's DNS answers (default true). */
    dns: z.boolean().optional(),
    credentials: z.array(credentialRuleSchema).max(MAX_CREDENTIAL_RULES).optional(),
  })
  .superRefine((policy, ctx) => {
    policy.credentials?.forEach((rule, i) => {
      if (typeof parseAllowEntry(rule.domain) === "string") return;
      const allowed = compilePolicy({ ...policy, credentials: [] }).allowsName(
        rule.domain.toLowerCase(),
        443,
      );
      if (!allowed.allowed) {
        ctx.addIssue({
          code: "custom",
          path: ["credentials", i, "domain"],
          message: `'${rule.domain}' is not allowed by this policy's egress: allow it too`,
        });
      }
    });
  });
export type NetworkPolicy = z.infer<typeof networkPolicySchema>;

/** What a desktop without a policy has: the open network. */
export const OPEN_NETWORK: NetworkPolicy = { egress: "allow" };

/** The policy as records and `GET` show it: every default said. */
export function describePolicy(policy: NetworkPolicy) {
  return {
    egress: policy.egress,
    dns: policy.dns ?? true,
    credentials: (policy.credentials ?? []).map((rule) => ({
      domain: rule.domain.toLowerCase(),
      secret: rule.secret,
      header: rule.header ?? "Authorization",
    })),
  };
}

/** Whether a policy restricts anything (a cage is needed) or is the open network. */
export function restricts(policy: NetworkPolicy): boolean {
  return policy.egress !== "allow" || (policy.credentials?.length ?? 0) > 0;
}

export interface Verdict {
  allowed: boolean;
  /** The entry that allowed it (`*.example.com:443`, `egress allow`), or why it was refused. */
  rule: string;
}

/** Addresses that are the host's or its networks': never reached through a name unless listed. */
const INTERNAL = new BlockList();
for (const [net, prefix] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.168.0.0", 16],
  ["224.0.0.0", 4],
  ["240.0.0.0", 4],
] as const) {
  INTERNAL.addSubnet(net, prefix, "ipv4");
}
for (const [net, prefix] of [
  ["::", 128],
  ["::1", 128],
  ["fc00::", 7],
  ["fe80::", 10],
  ["ff00::", 8],
] as const) {
  INTERNAL.addSubnet(net, prefix, "ipv6");
}

/** Loopback, link-local, private, shared, multicast or unspecified (IPv4-mapped IPv6 as its IPv4). */
export function isInternalAddress(address: string, hostAddresses: ReadonlySet<string> = new Set()): boolean {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1];
  const plain = mapped ?? address;
  const family = isIP(plain);
  if (family === 0) return true;
  return hostAddresses.has(plain) || INTERNAL.check(plain, family === 4 ? "ipv4" : "ipv6");
}

/** The policy as the proxy asks it, compiled once per policy. */
export interface CompiledPolicy {
  readonly policy: NetworkPolicy;
  /** May a connection to this name (lower case, no trailing dot) and port be made? */
  allowsName(name: string, port: number): Verdict;
  /** May this address be reached, having been listed or being outside the host's networks? */
  allowsAddress(address: string, port: number, internal: boolean): Verdict;
  /** Whether an allow entry names this name, on whatever port (what the desktop's DNS answers). */
  knowsName(name: string): boolean;
  /** The credential rule for requests to this name, if any (the most specific domain wins). */
  credentialFor(name: string): CredentialRule | undefined;
  /** Whether the desktop's DNS answers at all. */
  readonly dns: boolean;
}

export function compilePolicy(policy: NetworkPolicy): CompiledPolicy {
  const entries =
    typeof policy.egress === "object"
      ? policy.egress.allow.map(parseAllowEntry).filter((e): e is AllowEntry => typeof e !== "string")
      : [];
  const domains = entries.filter((e) => e.kind === "domain");
  const addresses = entries
    .filter((e) => e.kind === "address")
    .map((e) => {
      const list = new BlockList();
      list.addSubnet(e.address, e.prefix, e.family === 4 ? "ipv4" : "ipv6");
      return { entry: e, list };
    });
  const portOk = (entry: AllowEntry, port: number) => entry.port === undefined || entry.port === port;
  const nameMatches = (entry: Extract<AllowEntry, { kind: "domain" }>, name: string) =>
    entry.wildcard ? name.endsWith(`.${entry.name}`) : name === entry.name;
  const credentials = [...(policy.credentials ?? [])].sort((a, b) => b.domain.length - a.domain.length);
  return {
    policy,
    dns: policy.dns ?? true,
    allowsName(name, port) {
      if (policy.egress === "deny") return { allowed: false, rule: "egress deny" };
      if (policy.egress === "allow") return { allowed: true, rule: "egress allow" };
      const entry = domains.find((e) => nameMatches(e, name) && portOk(e, port));
      if (entry) return { allowed: true, rule: entry.text };
      const otherPort = domains.find((e) => nameMatches(e, name));
      return {
        allowed: false,
        rule: otherPort ? `port ${port} is not allowed (only '${otherPort.text}')` : "not in the allow list",
      };
    },
    allowsAddress(address, port, internal) {
      const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1] ?? address;
      const family = isIP(mapped) === 6 ? "ipv6" : "ipv4";
      const listed = addresses.find(({ entry, list }) => list.check(mapped, family) && portOk(entry, port));
      if (listed) return { allowed: true, rule: listed.entry.text };
      if (policy.egress === "deny") return { allowed: false, rule: "egress deny" };
      if (internal) return { allowed: false, rule: "an address of the host or its private networks" };
      if (policy.egress === "allow") return { allowed: true, rule: "egress allow" };
      return { allowed: false, rule: "not in the allow list" };
    },
    knowsName(name) {
      return policy.egress === "allow" || domains.some((e) => nameMatches(e, name));
    },
    credentialFor(name) {
      return credentials.find((rule) => {
        const parsed = parseAllowEntry(rule.domain);
        return typeof parsed !== "string" && parsed.kind === "domain" && nameMatches(parsed, name);
      });
    },
  };
}

/**
 * The `network` field of a create request (and a pool's): lume's network mode (`nat`), or a
 * policy; a policy's problems are named with their path (`network.egress.allow.0: …`).
 */
export const networkFieldSchema = z
  .unknown()
  .transform((value, ctx): string | NetworkPolicy => {
    if (typeof value === "string") return value;
    const parsed = networkPolicySchema.safeParse(value);
    if (parsed.success) return parsed.data;
    for (const issue of parsed.error.issues) {
      ctx.addIssue({ code: "custom", message: issue.message, path: issue.path });
    }
    return z.NEVER;
  })
  .optional();

/** The policy a request's `network` field gives, if it gives one (not a network mode). */
export function policyOf(network: string | NetworkPolicy | undefined): NetworkPolicy | undefined {
  return typeof network === "object" ? network : undefined;
}

/** The network mode a request's `network` field gives, if it gives one (not a policy). */
export function networkModeOf(network: string | NetworkPolicy | undefined): string | undefined {
  return typeof network === "string" ? network : undefined;
}
