/**
 * `hangar vm network NAME [POLICY]`, `hangar vm egress NAME` and `hangar secret set|ls|rm`: a
 * desktop's network policy, the egress proxy's decisions for it, and the secrets credential rules
 * name (docs/egress.md).
 */
import { readFileSync } from "node:fs";
import type { Command } from "commander";
import { clientOf, clientOptions, type Json, output, table } from "./host-client.js";
import { UsageError } from "./util.js";

const vmPath = (name: string) => `/svc/vms/${encodeURIComponent(name)}`;

/** `deny`, `allow`, or a policy as JSON (`{"egress": …}`), as `--network` and `vm network` take it. */
export function policyArgument(text: string): Json {
  if (text === "deny" || text === "allow") return { egress: text };
  try {
    return JSON.parse(text);
  } catch {
    throw new UsageError(
      `a network policy is deny, allow or JSON such as '{"egress": {"allow": ["example.com"]}}'`,
    );
  }
}

/** A record's `network` in one line: `deny`, `open`, `allow a, b (+3); credentials api.example.com`. */
export function describeNetwork(network: Json | undefined): string | undefined {
  if (!network) return undefined;
  const egress = network.egress;
  const what = !network.caged
    ? "open (not caged)"
    : typeof egress === "string"
      ? egress
      : `allow ${(egress.allow as string[]).join(", ") || "nothing"}`;
  const credentials = (network.credentials as Json[]).map((c) => `${c.domain} (secret ${c.secret})`);
  return [
    what,
    network.dns === false ? "no DNS" : undefined,
    network.proxy ? `proxy ${network.proxy}` : undefined,
    credentials.length > 0 ? `credentials: ${credentials.join(", ")}` : undefined,
  ]
    .filter(Boolean)
    .join("; ");
}

export function registerEgress(program: Command, vm: Command) {
  clientOptions(
    vm
      .command("network <name> [policy]")
      .description(
        "Show a desktop's network policy, or change it (deny, allow or JSON; in force for its next connection)",
      ),
  ).action(async (name, policy, opts) => {
    const client = clientOf(opts);
    if (policy === undefined) {
      return output(
        opts,
        await client.request<Json>("GET", `${vmPath(name)}/network`),
        (r) => describeNetwork(r) ?? "",
      );
    }
    const changed = await client.request<Json>("PUT", `${vmPath(name)}/network`, policyArgument(policy));
    output(opts, changed, (r) => `${name}: ${describeNetwork(r.network)}`);
  });

  clientOptions(vm.command("egress <name>").description("The egress proxy's last decisions for a desktop"))
    .option("-n, --tail <count>", "only the last ones", "50")
    .action(async (name, opts) => {
      const answer = await clientOf(opts).request<Json>(
        "GET",
        `${vmPath(name)}/egress?limit=${Number(opts.tail)}`,
      );
      output(opts, answer, (r) =>
        r.events.length === 0
          ? `No connections of ${name} yet.`
          : table(
              (r.events as Json[]).map((e) => ({
                ...e,
                decision: e.allowed ? "allowed" : "refused",
                target: `${e.name ?? e.address}${e.port ? `:${e.port}` : ""}`,
                bytes: e.bytesIn === undefined ? "" : `${e.bytesOut}/${e.bytesIn}`,
              })),
              [
                ["time", "TIME"],
                ["decision", "DECISION"],
                ["via", "VIA"],
                ["target", "TARGET"],
                ["address", "ADDRESS"],
                ["rule", "RULE"],
                ["bytes", "OUT/IN"],
              ],
            ),
      );
    });

  const secret = program
    .command("secret")
    .description("Secrets the egress proxy adds to caged desktops' requests");
  clientOptions(
    secret
      .command("set <name>")
      .description("Set a secret from a file (- for standard input): never on the command line"),
  )
    .requiredOption(
      "--from-file <file>",
      "where the value is (- for standard input); a trailing newline is dropped",
    )
    .action(async (name, opts) => {
      const value = readFileSync(opts.fromFile === "-" ? 0 : opts.fromFile, "utf8").replace(/\r?\n$/, "");
      output(
        opts,
        await clientOf(opts).request<Json>("POST", "/svc/secrets", { name, value }),
        (r) => `${r.message}: ${name}.`,
      );
    });
  clientOptions(
    secret.command("ls").alias("list").description("The secrets' names (never their values)"),
  ).action(async (opts) => {
    const list = await clientOf(opts).request<Json[]>("GET", "/svc/secrets");
    output(opts, list, (l: Json[]) =>
      l.length === 0
        ? "No secrets."
        : table(
            l.map((s) => ({ ...s, users: s.usedBy.join(", ") })),
            [
              ["name", "NAME"],
              ["updatedAt", "UPDATED"],
              ["users", "USED BY"],
            ],
          ),
    );
  });
  clientOptions(
    secret.command("rm <name>").alias("delete").description("Delete a secret no policy names"),
  ).action(async (name, opts) => {
    output(
      opts,
      await clientOf(opts).request<Json>("DELETE", `/svc/secrets/${encodeURIComponent(name)}`),
      () => `Deleted ${name}.`,
    );
  });
}
