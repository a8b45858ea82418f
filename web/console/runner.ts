/**
 * The command console: every command from `/commands`, a form generated from its JSON Schema, Run
 * (through `POST /cmd`, marked as the console's), the reply with images shown as images, and the
 * same request as a curl command line.
 */
import { api, apiJson, authHeaders, element, make, readEvents } from "./api.js";

type Schema = {
  type?: string | string[];
  enum?: unknown[];
  default?: unknown;
  description?: string;
  properties?: Record<string, Schema>;
  required?: string[];
  anyOf?: Schema[];
};
interface CatalogEntry {
  description: string;
  schema: Schema;
}

export class CommandConsole {
  private catalog: Record<string, CatalogEntry> = {};
  private readonly select = element<HTMLSelectElement>("command");
  private readonly form = element<HTMLFormElement>("params");
  private readonly reply = element<HTMLElement>("reply");

  async start() {
    this.catalog = (await apiJson<{ commands: Record<string, CatalogEntry> }>("/commands")).commands;
    this.select.replaceChildren(
      ...Object.keys(this.catalog).map((name) => make("option", { value: name }, [name])),
    );
    this.select.value = "version";
    this.select.onchange = () => this.buildForm();
    element("run").onclick = () => void this.run();
    element("curl").onclick = () => this.showCurl();
    this.buildForm();
  }

  private buildForm() {
    const entry = this.catalog[this.select.value];
    element("description").textContent = entry.description;
    const required = new Set(entry.schema.required ?? []);
    const fields: Node[] = [];
    for (const [name, schema] of Object.entries(entry.schema.properties ?? {})) {
      const label = make("label", { htmlFor: `param-${name}`, title: schema.description ?? "" }, [
        required.has(name) ? `${name} *` : name,
      ]);
      fields.push(label, fieldFor(name, schema));
    }
    this.form.replaceChildren(...fields);
    element("curl-text").hidden = true;
  }

  /** The parameters the form holds; empty fields are left out. */
  private params(): Record<string, unknown> {
    const params: Record<string, unknown> = {};
    for (const field of this.form.querySelectorAll<HTMLInputElement>("[data-kind]")) {
      const name = field.name;
      const kind = field.dataset.kind;
      if (kind === "boolean") {
        if (field.indeterminate) continue;
        params[name] = field.checked;
      } else if (field.value !== "") {
        params[name] =
          kind === "number" ? Number(field.value) : kind === "json" ? JSON.parse(field.value) : field.value;
      }
    }
    return params;
  }

  private async run() {
    let params: Record<string, unknown>;
    try {
      params = this.params();
    } catch (err) {
      this.reply.replaceChildren(
        make("p", { className: "error" }, [`Invalid JSON: ${(err as Error).message}`]),
      );
      return;
    }
    this.reply.replaceChildren(make("p", { className: "muted" }, ["Running…"]));
    const res = await api("/cmd", {
      method: "POST",
      headers: { "content-type": "application/json", "x-hangar-client": "console" },
      body: JSON.stringify({ command: this.select.value, params }),
    });
    if (!res.ok) {
      this.reply.replaceChildren(
        make("p", { className: "error" }, [((await res.json()) as { detail: string }).detail]),
      );
      return;
    }
    const shown: Node[] = [];
    await readEvents(res, (data) => shown.push(...renderEvent(JSON.parse(data))));
    this.reply.replaceChildren(...shown);
  }

  private showCurl() {
    const body = JSON.stringify({ command: this.select.value, params: this.params() });
    const headers = { "content-type": "application/json", ...authHeaders() };
    const text = [
      `curl -N ${quote(`${location.origin}/cmd`)}`,
      ...Object.entries(headers).map(([name, value]) => `-H ${quote(`${name}: ${value}`)}`),
      `-d ${quote(body)}`,
    ].join(" \\\n  ");
    const pre = element("curl-text");
    pre.textContent = text;
    pre.hidden = false;
    void navigator.clipboard?.writeText(text).catch(() => undefined);
  }
}

function fieldFor(name: string, schema: Schema): HTMLElement {
  const plain = schema.anyOf?.find((option) => option.type !== "null") ?? schema;
  const type = Array.isArray(plain.type) ? plain.type.find((t) => t !== "null") : plain.type;
  const id = `param-${name}`;
  if (plain.enum) {
    const select = make("select", { id, name }, [
      make("option", { value: "" }, [""]),
      ...plain.enum.map((value) => make("option", { value: String(value) }, [String(value)])),
    ]);
    select.dataset.kind = "string";
    if (schema.default !== undefined) select.value = String(schema.default);
    return select;
  }
  if (type === "boolean") {
    const box = make("input", { id, name, type: "checkbox" });
    box.dataset.kind = "boolean";
    box.checked = schema.default === true;
    box.indeterminate = schema.default === undefined;
    return box;
  }
  if (type === "number" || type === "integer") {
    const input = make("input", { id, name, type: "number", step: "any" });
    input.dataset.kind = "number";
    input.placeholder = schema.default === undefined ? "" : String(schema.default);
    return input;
  }
  if (type === "string") {
    const input = make("input", { id, name });
    input.dataset.kind = "string";
    input.placeholder = schema.default === undefined ? "" : String(schema.default);
    return input;
  }
  const area = make("textarea", { id, name, placeholder: "JSON" });
  area.dataset.kind = "json";
  return area;
}

/** A reply event: its JSON, and each base64 image in it as an image. */
function renderEvent(event: Record<string, unknown>): Node[] {
  const content = (event.content ?? {}) as Record<string, unknown>;
  const nodes: Node[] = [];
  const image = typeof content.image_data === "string" ? content.image_data : undefined;
  if (image) {
    const format = typeof content.format === "string" ? content.format : "png";
    nodes.push(make("img", { src: `data:image/${format};base64,${image}`, alt: "reply image" }));
  }
  const shown = image ? { ...content, image_data: `(${image.length} base64 characters)` } : event;
  nodes.push(
    make("pre", { className: event.success === false ? "error" : "" }, [JSON.stringify(shown, null, 2)]),
  );
  return nodes;
}

function quote(text: string): string {
  return `'${text.replaceAll("'", `'\\''`)}'`;
}
