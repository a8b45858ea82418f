/**
 * Replies and request bodies as OSWorld's Flask server has them: a bare string is `200 text/html`,
 * `abort()` is Werkzeug's small HTML page, JSON is `application/json`. Bodies are read with the
 * server's body limit (refused before reading when `Content-Length` says more). What they refuse is
 * a `CommandError` (`invalid_params`, `too_large`), answered with its HTTP status by the app.
 */
import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { CommandError } from "../../../common/errors.js";
import { BodyTooLargeError, readBody } from "../../http/body.js";
import type { ComputerEnv } from "../../http/env.js";

export type OsworldContext = Context<ComputerEnv>;

const REASONS: Record<number, string> = {
  400: "Bad Request",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  413: "Request Entity Too Large",
  415: "Unsupported Media Type",
  500: "Internal Server Error",
};

/** A string returned by a Flask view. */
export function text(c: OsworldContext, body: string, status: ContentfulStatusCode = 200) {
  return c.body(body, status, { "content-type": "text/html; charset=utf-8" });
}

/** Werkzeug's error page, as `abort(status, description)` writes it. */
export function htmlError(c: OsworldContext, status: ContentfulStatusCode, description?: string) {
  const reason = REASONS[status] ?? "Error";
  const detail = description ?? reason;
  return text(
    c,
    `<!doctype html>\n<html lang=en>\n<title>${status} ${reason}</title>\n<h1>${reason}</h1>\n<p>${escapeHtml(detail)}</p>\n`,
    status,
  );
}

export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
}

/** What the body readers throw: the routes' error handler answers it with its HTTP status. */
const badRequest = (message: string) => new CommandError("invalid_params", message);

async function rawBody(c: OsworldContext, limit: number): Promise<Buffer> {
  try {
    return await readBody(c.env.incoming, limit);
  } catch (err) {
    if (err instanceof BodyTooLargeError)
      throw new CommandError("too_large", `The body is larger than ${limit} bytes`);
    throw err;
  }
}

/** `request.json`: a JSON object, or 400 as Flask answers a body that is not one. */
export async function jsonBody(c: OsworldContext, limit: number): Promise<Record<string, unknown>> {
  const type = c.req.header("content-type") ?? "";
  if (!/^application\/([\w.+-]+\+)?json/i.test(type)) {
    throw badRequest(
      "Did not attempt to load JSON data because the request Content-Type was not 'application/json'.",
    );
  }
  const body = await rawBody(c, limit);
  let value: unknown;
  try {
    value = JSON.parse(body.toString("utf8"));
  } catch {
    throw badRequest("Failed to decode JSON object: the body is not valid JSON.");
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw badRequest("The JSON body must be an object.");
  }
  return value as Record<string, unknown>;
}

/** `request.form` of an urlencoded body (an empty form for other kinds, as Flask). */
export async function formBody(c: OsworldContext, limit: number): Promise<URLSearchParams> {
  const type = c.req.header("content-type") ?? "";
  const body = await rawBody(c, limit);
  if (!/^application\/x-www-form-urlencoded/i.test(type)) return new URLSearchParams();
  return new URLSearchParams(body.toString("utf8"));
}

/** A multipart form: its text fields and files (read whole, within the limit). */
export async function multipartBody(c: OsworldContext, limit: number): Promise<FormData> {
  const type = c.req.header("content-type") ?? "";
  if (!/^multipart\/form-data/i.test(type)) return new FormData();
  const body = await rawBody(c, limit);
  try {
    return await new Response(new Uint8Array(body), { headers: { "content-type": type } }).formData();
  } catch {
    throw badRequest("The multipart body could not be parsed.");
  }
}

/** A field that must be a string when given; `fallback` when absent or null. */
export function stringField(
  data: Record<string, unknown>,
  name: string,
  fallback?: string,
): string | undefined {
  const value = data[name];
  if (value === undefined || value === null) return fallback;
  if (typeof value !== "string") throw badRequest(`${name} must be a string`);
  return value;
}

export function booleanField(data: Record<string, unknown>, name: string, fallback: boolean): boolean {
  const value = data[name];
  if (value === undefined || value === null) return fallback;
  if (typeof value !== "boolean") throw badRequest(`${name} must be true or false`);
  return value;
}

export function numberField(
  data: Record<string, unknown>,
  name: string,
  fallback: number,
  range: { min: number; max: number },
): number {
  const value = data[name];
  if (value === undefined || value === null) return fallback;
  if (typeof value !== "number" || !Number.isFinite(value) || value < range.min || value > range.max) {
    throw badRequest(`${name} must be a number from ${range.min} to ${range.max}`);
  }
  return value;
}

/** `Content-Disposition: attachment` for any file name: ASCII fallback plus RFC 5987 UTF-8. */
export function attachment(name: string): string {
  const ascii = name.replace(/[^\x20-\x7e]|["\\]/g, "_");
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name)}`;
}
