/**
 * The checks the client makes before sending, where the Python client makes them: the
 * same typed error naming the same field, and nothing sent. Everything else the server
 * checks, and its answer is the same class.
 */
import {
  InputError,
  InvalidRoleError,
  InvalidSizeError,
  InvalidTypeError,
  MissingUserError,
} from "./errors.js";

export const MAX_ID_CHARS = 255;
export const MAX_LIMIT = 10_000;
export const ROLES = ["agent_call", "agent_response", "assistant", "system", "tool", "user"];
export const SEARCH_FILTERS = [
  "agent_id",
  "created_after",
  "created_before",
  "memory_type",
  "metadata",
  "session_id",
];
/** Message fields an `add` takes besides role, content and metadata (camelCase). */
export const MESSAGE_FIELDS: Record<string, string> = {
  messageId: "message_id",
  name: "name",
  toolCalls: "tool_calls",
  toolCallId: "tool_call_id",
  agentCalls: "agent_calls",
  structuredData: "structured_data",
  images: "images",
  timestamp: "timestamp",
};

/** The name Python gives a value's type in an error ("str", "int", "dict"...). */
export function typeName(value: unknown): string {
  if (value === null || value === undefined) return "NoneType";
  if (typeof value === "string") return "str";
  if (typeof value === "boolean") return "bool";
  if (typeof value === "number") return Number.isInteger(value) ? "int" : "float";
  if (Array.isArray(value)) return "list";
  if (typeof value === "object") return "dict";
  return typeof value;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** An optional short id (session, agent): text of at most 255 characters, no NUL. */
export function checkTextId(value: unknown, name: string): string | null {
  if (value === null || value === undefined) return null;
  if (typeof value !== "string") {
    throw new InvalidTypeError(name, `must be a str, got ${typeName(value)}`);
  }
  if (value.length > MAX_ID_CHARS || value.includes("\0")) {
    throw new InputError(name, `must be at most ${MAX_ID_CHARS} characters without NUL`);
  }
  const bad = LONE_SURROGATE.exec(value);
  if (bad) {
    throw new InputError(
      name,
      `holds a lone surrogate at position ${bad.index}, which is not valid Unicode`,
      "remove the character",
    );
  }
  return value;
}

/** A user's id: required, not blank. */
export function checkUserId(value: unknown, name = "user_id"): string {
  if (value === null || value === undefined || (typeof value === "string" && !value.trim())) {
    throw new MissingUserError(name, "is required", "pass the id of the user the memory belongs to");
  }
  return checkTextId(value, name) as string;
}

/** A number in [0, 1] (`importance`, `minScore`). */
export function checkUnit(value: unknown, name: string): number {
  if (typeof value !== "number") {
    throw new InvalidTypeError(name, `must be a number, got ${typeName(value)}`);
  }
  if (!(value >= 0 && value <= 1)) throw new InvalidSizeError(name, `${shown(value)} is outside [0, 1]`);
  return value;
}

/** An int in [minimum, 10000] (a page's `limit`, `offset`). */
export function checkLimit(value: unknown, name = "limit", minimum = 1): number {
  if (typeof value !== "number" || !Number.isInteger(value)) {
    throw new InvalidTypeError(name, `must be an int, got ${typeName(value)}`);
  }
  if (value < minimum || value > MAX_LIMIT) {
    throw new InvalidSizeError(name, `${value} is outside [${minimum}, ${MAX_LIMIT}]`);
  }
  return value;
}

/** Seconds to wait: null (no limit) or a number >= 0. */
export function checkTimeout(value: unknown, name = "timeout"): number | null {
  if (value === null || value === undefined) return null;
  if (typeof value !== "number") {
    throw new InvalidTypeError(name, `must be seconds or None, got ${typeName(value)}`);
  }
  if (Number.isNaN(value) || value < 0) {
    throw new InvalidSizeError(name, `must be seconds >= 0 or None, got ${shown(value)}`);
  }
  return value;
}

/** A boolean (1, 0 or "no" are refused: each would read as another answer somewhere). */
export function checkFlag(value: unknown, name: string): boolean {
  if (typeof value !== "boolean") {
    throw new InvalidTypeError(name, `must be a bool, got ${typeName(value)}`);
  }
  return value;
}

/** A message's id: non-empty text. */
export function checkMessageId(value: unknown, name = "message_id"): string {
  if (typeof value !== "string") {
    throw new InvalidTypeError(name, `must be a str, got ${typeName(value)}`, "pass Message.message_id");
  }
  if (!value) throw new InputError(name, "is empty", "pass the id of one of the user's messages");
  return checkTextId(value, name) as string;
}

/** Message ids: one id or a list of ids. */
export function checkMessageIds(ids: unknown): string[] {
  const list = typeof ids === "string" ? [ids] : ids;
  if (!isIterable(list) || typeof list === "string") {
    throw new InvalidTypeError("message_ids", `expected a list of ids, got ${typeName(ids)}`);
  }
  const found = [...list];
  found.forEach((id, i) => checkTextId(id, `message_ids[${i}]`));
  return found as string[];
}

/** A number as Python prints it in an error (`nan`, `inf`, `-1`, `0.5`). */
export function shown(value: number): string {
  if (Number.isNaN(value)) return "nan";
  if (!Number.isFinite(value)) return value > 0 ? "inf" : "-inf";
  return String(value);
}

/** A plain object (a JSON dict). */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export function isIterable(value: unknown): value is Iterable<unknown> {
  return value !== null && value !== undefined && typeof (value as Iterable<unknown>)[Symbol.iterator] === "function";
}

/** `search`'s filters: an object of the known filter keys only. */
export function checkSearchFilters(filters: unknown): void {
  if (!isRecord(filters)) {
    throw new InvalidTypeError("filters", `expected a dict, got ${typeName(filters)}`);
  }
  if ("user_id" in filters) {
    throw new InvalidTypeError(
      "filters.user_id",
      "is not a filter",
      "a search reads the memories of its user_id argument only; pass the user there",
    );
  }
  refuseUnknown(Object.keys(filters), SEARCH_FILTERS, "filters", "a filter");
}

/** InvalidTypeError naming the first of `given` not in `known` (a typo would be lost). */
export function refuseUnknown(given: string[], known: string[], where: string, what: string): void {
  const unknown = given.filter((k) => !known.includes(k)).sort();
  if (unknown.length) {
    const field = where ? `${where}.${unknown[0]}` : unknown[0];
    throw new InvalidTypeError(field, `is not ${what}`, `use one of ${[...known].sort().join(", ")}`);
  }
}

/** A message role. */
export function checkRole(role: unknown): void {
  if (typeof role !== "string" || !ROLES.includes(role)) {
    throw new InvalidRoleError("role", `unknown role ${typeof role === "string" ? `'${role}'` : typeName(role)}`, `use one of ${ROLES.join(", ")}`);
  }
}

/** Message content: text, an object, a list of parts, or null. */
export function checkContent(content: unknown): void {
  if (!(content === null || typeof content === "string" || typeof content === "object")) {
    throw new InvalidTypeError(
      "content",
      `expected str, dict, list of parts or None, got ${typeName(content)}`,
      "convert the value to text first",
    );
  }
}

/** `value` as JSON carries it: a non-finite number (which JSON.stringify would turn into
 * null) or a bigint is refused, naming the top-level `field` it is under. */
export function checkJson(value: unknown, field: string): void {
  if (typeof value === "number" && !Number.isFinite(value)) {
    throw new InputError(field, `holds ${shown(value)}, which JSON cannot carry`, "use finite numbers");
  }
  if (typeof value === "bigint") {
    throw new InvalidTypeError(field, "holds a bigint, which JSON cannot carry", "use a number");
  }
  if (typeof value === "object" && value !== null && !(value instanceof Date)) {
    for (const item of Object.values(value)) checkJson(item, field);
  }
}

export const MEMORY_TYPES = ["message", "fact", "preference", "context", "summary", "tool", "passage"];

/** The filters of `search` and `listMemories`, checked as the library's `make_filter`
 * checks them: memory types, and metadata of top-level keys equal to text, finite
 * numbers, booleans or null. */
export function checkFilters(memoryType: unknown, metadata: unknown): void {
  if (memoryType !== null && memoryType !== undefined) {
    if (typeof memoryType !== "string" && !Array.isArray(memoryType)) {
      throw new InvalidTypeError("memory_type", `must be a str or a list of str, got ${typeName(memoryType)}`);
    }
    for (const type of typeof memoryType === "string" ? [memoryType] : memoryType) {
      if (!MEMORY_TYPES.includes(type)) {
        const listed = MEMORY_TYPES.map((t) => `'${t}'`).join(", ");
        throw new InputError("memory_type", `${pyRepr(type)} is not a memory type`, `use one of (${listed})`);
      }
    }
  }
  if (metadata === null || metadata === undefined) return;
  if (!isRecord(metadata)) {
    throw new InvalidTypeError("metadata", `must be a dict, got ${typeName(metadata)}`);
  }
  for (const [key, value] of Object.entries(metadata)) {
    if (!key) throw new InvalidTypeError("metadata", "filter key '' must be a non-empty str");
    if (!(value === null || ["string", "number", "boolean"].includes(typeof value))) {
      throw new InvalidTypeError(`metadata.${key}`, "filter values must be str, int, float, bool or None");
    }
    if (typeof value === "string" && value.includes("\0")) {
      throw new InputError(`metadata.${key}`, "contains a NUL character");
    }
    if (typeof value === "number" && !Number.isFinite(value)) {
      throw new InputError(`metadata.${key}`, `is ${shown(value)}, which no stored value equals`, "use a finite number");
    }
  }
}

/** A value as Python's repr shows it in an error (text quoted). */
function pyRepr(value: unknown): string {
  return typeof value === "string" ? `'${value}'` : JSON.stringify(value);
}
