/** `hangar pool create|ls|get|resize|rm|claim|keepalive|release`: warm pools of ready desktops on the host service. */
import { type Command, InvalidArgumentError } from "commander";
import { clientOf, clientOptions, type Json, output, table } from "./host-client.js";

const poolPath = (name: string) => `/svc/pools/${encodeURIComponent(name)}`;

function wholeNumber(value: string) {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError("expected a whole number");
  return n;
}

function seconds(value: string) {
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0) throw new InvalidArgumentError("expected a number of seconds");
  return n;
}

function poolRows(pools: Json[]) {
  return pools.map((p) => ({
    ...p,
    ttlText: p.ttl === null ? "-" : `${p.ttl}s`,
    counts: `${p.ready}/${p.starting}/${p.claimed}`,
    asleep: p.hibernated ?? 0,
  }));
}

function describePool(p: Json): string {
  const lines = [
    `name:      ${p.name}`,
    `runtime:   ${p.runtime}`,
    `template:  ${p.template} (${p.templateKind})`,
    ...(p.fromSnapshot ? [`snapshot:  ${p.fromSnapshot} (members are forks of it)`] : []),
    `size:      target ${p.target}, min ${p.min}, max ${p.max} (ready ${p.ready}, starting ${p.starting}, asleep ${p.hibernated}, claimed ${p.claimed})`,
    `claim ttl: ${p.ttl === null ? "until released" : `${p.ttl} s, then ${p.onExpire === "hibernate" ? "put to sleep" : "released"}`}`,
    ...(p.idleTimeout ? [`idle time: ${p.idleTimeout} s (beyond the target)`] : []),
    ...(p.lastError ? [`last error: ${p.lastError}`] : []),
  ];
  const desktops = p.desktops.length
    ? table(p.desktops, [
        ["name", "DESKTOP"],
        ["state", "STATE"],
        ["claimedBy", "CLAIMED BY"],
        ["claimedAt", "SINCE"],
        ["expiresAt", "EXPIRES"],
        ["startStep", "STARTING"],
      ])
    : "(no desktops yet)";
  return `${lines.join("\n")}\n\n${desktops}`;
}

export function registerPool(program: Command) {
  const pool = program
    .command("pool")
    .description(
      "Warm pools: desktops kept started, handed out in milliseconds (claim) and removed after use (release)",
    );

  clientOptions(
    pool
      .command("create <name>")
      .description("Create a pool that keeps SIZE desktops ready, or follows demand between --min and --max"),
  )
    .option("--size <n>", "desktops kept ready (1 to 256): min, max and target at once", wholeNumber)
    .option("--min <n>", "unclaimed desktops kept at least (those beyond the target asleep)", wholeNumber)
    .option("--max <n>", "unclaimed desktops at most (claims start one up to it)", wholeNumber)
    .option("--target <n>", "unclaimed desktops kept awake and ready", wholeNumber)
    .option("--idle-timeout <duration>", "how long one beyond the target stays awake, e.g. 300s or 5m")
    .option("--from-snapshot <snapshot>", "a memory snapshot of the template (QEMU): members are its forks")
    .option(
      "--template <desktop-or-image>",
      "a stopped desktop to clone, or an image (default: the desktop image)",
    )
    .option("--runtime <kind>", "container, kubernetes or qemu (default: the template's, else the service's)")
    .option("--ttl <seconds>", "a claim is released by itself after this long (default: never)", wholeNumber)
    .option("--on-expire <what>", "what a claim whose ttl ran out becomes: release (default) or hibernate")
    .option("--cpu <n>", "CPUs of each desktop made from an image", wholeNumber)
    .option("--memory <size>", "memory of each desktop made from an image, e.g. 2GB")
    .option("--display <WxH>", "screen of each desktop made from an image, e.g. 1280x800")
    .action(async (name, opts) => {
      const created = await clientOf(opts).request<Json>("POST", "/svc/pools", {
        name,
        size: opts.size,
        min: opts.min,
        max: opts.max,
        target: opts.target,
        idleTimeout: opts.idleTimeout,
        fromSnapshot: opts.fromSnapshot,
        onExpire: opts.onExpire,
        template: opts.template,
        runtime: opts.runtime,
        ttl: opts.ttl,
        cpu: opts.cpu,
        memory: opts.memory,
        display: opts.display,
      });
      output(
        opts,
        created,
        (p) => `Created pool ${p.name}: ${p.size} ${p.runtime} desktops from ${p.template}, starting.`,
      );
    });

  clientOptions(pool.command("ls").alias("list").description("List the pools")).action(async (opts) => {
    const pools = await clientOf(opts).request<Json[]>("GET", "/svc/pools");
    output(opts, pools, (list) =>
      list.length === 0
        ? "No pools (create one with: hangar pool create NAME --size N)."
        : table(poolRows(list), [
            ["name", "NAME"],
            ["runtime", "RUNTIME"],
            ["template", "TEMPLATE"],
            ["size", "SIZE"],
            ["counts", "READY/STARTING/CLAIMED"],
            ["ttlText", "TTL"],
            ["asleep", "ASLEEP"],
            ["lastError", "LAST ERROR"],
          ]),
    );
  });

  clientOptions(pool.command("get <name>").description("Show a pool and its desktops")).action(
    async (name, opts) => {
      output(opts, await clientOf(opts).request<Json>("GET", poolPath(name)), describePool);
    },
  );

  clientOptions(
    pool.command("resize <name> <size>").description("Change how many desktops a pool keeps ready"),
  )
    .option("--ttl <seconds>", "also change the ttl of new claims", wholeNumber)
    .action(async (name, size, opts) => {
      const body = { size: wholeNumber(size), ttl: opts.ttl };
      const changed = await clientOf(opts).request<Json>("PATCH", poolPath(name), body);
      output(opts, changed, (p) => `Pool ${p.name} keeps ${p.size} desktops ready.`);
    });

  clientOptions(
    pool
      .command("rm <name>")
      .alias("delete")
      .description("Remove a pool and all its desktops, claimed ones too"),
  ).action(async (name, opts) => {
    const removed = await clientOf(opts).request<Json>("DELETE", poolPath(name));
    output(opts, removed, () => `Removed pool ${name}.`);
  });

  clientOptions(
    pool.command("claim <name>").description("Take a ready desktop from a pool; prints its record"),
  )
    .option("--no-wait", "answer at once (exit 1) when no desktop is ready")
    .option("--timeout <seconds>", "how long to wait for one (default 60)", seconds)
    .option("--ttl <seconds>", "release it by itself after this long", wholeNumber)
    .option("--owner <text>", "who claims it, for people reading the pool")
    .action(async (name, opts) => {
      const claimed = await clientOf(opts).request<Json>("POST", `${poolPath(name)}/claim`, {
        wait: opts.wait,
        timeout: opts.timeout,
        ttl: opts.ttl,
        owner: opts.owner,
      });
      output(opts, claimed, (d) =>
        [
          `Claimed ${d.name} from pool ${d.pool}.`,
          `computer server: ${d.computerServerUrl}`,
          ...(d.apiKey
            ? [`api key:         ${d.apiKey} (send as X-API-Key, with X-Container-Name: ${d.name})`]
            : []),
          ...(d.vncUrl ? [`viewer:          ${d.vncUrl}`] : []),
          `expires:         ${d.claim.expiresAt ?? "when released"} (hangar pool release ${d.name})`,
        ].join("\n"),
      );
    });

  clientOptions(
    pool
      .command("keepalive <name> <desktop>")
      .description("Renew a claim's lease: it ends that long from now (its own ttl unless --ttl)"),
  )
    .option("--ttl <seconds>", "the new lease, from now", wholeNumber)
    .action(async (name, desktop, opts) => {
      const kept = await clientOf(opts).request<Json>(
        "POST",
        `${poolPath(name)}/claims/${encodeURIComponent(desktop)}/keepalive`,
        opts.ttl === undefined ? {} : { ttl: opts.ttl },
      );
      output(
        opts,
        kept,
        (k) =>
          `${k.name}: claimed until ${k.claim.expiresAt ?? `${Math.round(k.claim.remainingMs / 1000)} s after it wakes`}.`,
      );
    });

  clientOptions(
    pool
      .command("release <desktop>")
      .description("Give a claimed desktop back: it is removed, the pool refills"),
  ).action(async (desktop, opts) => {
    const released = await clientOf(opts).request<Json>(
      "POST",
      `/svc/vms/${encodeURIComponent(desktop)}/release`,
    );
    output(opts, released, (r) => `Released ${r.name} (pool ${r.pool} refills).`);
  });
}
