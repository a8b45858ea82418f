/** `hangar config …` and `hangar logs`: the settings and log routes of the host service. */
import { Argument, type Command } from "commander";
import { clientOf, clientOptions, type Json, output, table } from "./host-client.js";
import { UsageError } from "./util.js";

export function registerConfig(program: Command) {
  const config = program.command("config").description("Settings of the host service (hangar host serve)");

  clientOptions(config.command("get").description("Show the settings")).action(async (opts) => {
    output(opts, await clientOf(opts).request<Json>("GET", "/svc/config"), (s: Json) =>
      [
        `settings file:     ${s.settingsFile}`,
        `home directory:    ${s.homeDirectory}`,
        `default location:  ${s.defaultLocationName}`,
        `cache directory:   ${s.cacheDirectory}`,
        `caching:           ${s.cachingEnabled ? "on" : "off"}`,
        `ipsw catalog:      ${s.ipswCatalogUrl}`,
      ].join("\n"),
    );
  });

  clientOptions(
    config.command("set").description("Change the home directory, the cache directory or caching"),
  )
    .option("--home <dir>", "home directory (the `home` storage location; logs live under it)")
    .option("--cache-dir <dir>", "image cache directory")
    .option("--caching <on|off>", "keep pulled images in the cache")
    .option("--ipsw-catalog <url>", "address of Apple's restore-image catalog")
    .action(async (opts) => {
      if (opts.caching !== undefined && !["on", "off"].includes(opts.caching)) {
        throw new UsageError("--caching: expected on or off");
      }
      const body = {
        homeDirectory: opts.home,
        cacheDirectory: opts.cacheDir,
        cachingEnabled: opts.caching === undefined ? undefined : opts.caching === "on",
        ipswCatalogUrl: opts.ipswCatalog,
      };
      output(opts, await clientOf(opts).request<Json>("POST", "/svc/config", body), (r: Json) => r.message);
    });

  // lume's `config cache get|set`: the image cache directory alone.
  const cache = config.command("cache").description("The image cache directory");
  clientOptions(cache.command("get").description("Show the image cache directory")).action(async (opts) => {
    const settings = await clientOf(opts).request<Json>("GET", "/svc/config");
    output(opts, { cacheDirectory: settings.cacheDirectory }, (r: Json) => r.cacheDirectory);
  });
  clientOptions(cache.command("set <dir>").description("Change the image cache directory")).action(
    async (dir, opts) => {
      const body = { cacheDirectory: dir };
      output(opts, await clientOf(opts).request<Json>("POST", "/svc/config", body), (r: Json) => r.message);
    },
  );

  const storage = config.command("storage").alias("locations").description("Named storage locations for VMs");
  clientOptions(storage.command("ls").alias("list").description("List the storage locations")).action(
    async (opts) => {
      output(opts, await clientOf(opts).request<Json[]>("GET", "/svc/config/locations"), (list: Json[]) =>
        table(
          list.map((l) => ({ ...l, isDefault: l.isDefault ? "yes" : "" })),
          [
            ["name", "NAME"],
            ["path", "PATH"],
            ["isDefault", "DEFAULT"],
          ],
        ),
      );
    },
  );
  clientOptions(storage.command("add <name> <path>").description("Add a storage location")).action(
    async (name, path, opts) => {
      output(
        opts,
        await clientOf(opts).request<Json>("POST", "/svc/config/locations", { name, path }),
        (r: Json) => r.message,
      );
    },
  );
  clientOptions(
    storage.command("rm <name>").alias("remove").description("Remove a storage location (VMs stay on disk)"),
  ).action(async (name, opts) => {
    const path = `/svc/config/locations/${encodeURIComponent(name)}`;
    output(opts, await clientOf(opts).request<Json>("DELETE", path), (r: Json) => r.message);
  });
  clientOptions(storage.command("default <name>").description("Make a storage location the default")).action(
    async (name, opts) => {
      const path = `/svc/config/locations/default/${encodeURIComponent(name)}`;
      output(opts, await clientOf(opts).request<Json>("POST", path), (r: Json) => r.message);
    },
  );
}

export function registerLogs(program: Command) {
  clientOptions(
    program
      .command("logs")
      .description("Show the host service's logs: info, error or all")
      .addArgument(new Argument("[type]", "which log").choices(["info", "error", "all"]).default("all")),
  )
    .option("-n, --lines <n>", "only the last n lines of each")
    .action(async (type: string | undefined, opts) => {
      const query = new URLSearchParams({
        type: type ?? "all",
        ...(opts.lines ? { lines: opts.lines } : {}),
      });
      output(opts, await clientOf(opts).request<Json>("GET", `/svc/logs?${query}`), (logs: Json) =>
        Object.entries(logs)
          .map(([name, text]) => `== ${name} ==\n${text}`)
          .join("\n"),
      );
    });
}
