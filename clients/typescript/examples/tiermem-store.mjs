// TiermemStore: a LangGraph.js BaseStore whose items are tiermem memories, as Python's
// tiermem.integrations.langgraph.TiermemStore (the same namespaces, contents and
// metadata, so either language reads what the other wrote).
//
// The first label of a namespace is the user; the others are the kind:
// ["ana", "preference"] is Ana's memory of kind "preference". Each item is one memory,
// "{kind}/{key}: {text}", its value, kind and key in its metadata; every call is scoped
// to one user (a search or a listing names the user in its prefix).
import { BaseStore, InvalidNamespaceError } from "@langchain/langgraph-checkpoint";
import { InputError } from "tiermem";

const KIND = "langgraph_namespace";
const KEY = "langgraph_key";
const VALUE = "langgraph_value";
const UPDATED = "langgraph_updated_at";
const prefix = (depth) => `langgraph_prefix_${depth}`;
const KIND_TYPES = ["fact", "preference", "context"];
const MAX_LIMIT = 10_000;

export class TiermemStore extends BaseStore {
  /** @param memory a tiermem MemoryClient; @param importance of the memories written */
  constructor(memory, { importance = 0.5 } = {}) {
    super();
    this.memory = memory;
    this.importance = importance;
  }

  async batch(operations) {
    const results = [];
    for (const op of operations) {
      if ("value" in op) results.push(await this.#put(op));
      else if ("namespacePrefix" in op) results.push(await this.#search(op));
      else if ("key" in op) results.push(await this.#get(op));
      else results.push(await this.#listNamespaces(op));
    }
    return results;
  }

  async #get({ namespace, key }) {
    const [user, kind] = split(namespace);
    const record = await this.#find(user, kind, key);
    return record && item(record);
  }

  async #put({ namespace, key, value, index }) {
    const [user, kind] = split(namespace);
    const found = await this.#find(user, kind, key);
    if (value === null) {
      if (found) await this.memory.forget(found.id, user);
      return undefined;
    }
    const text = index === false ? JSON.stringify(value) : strings(value).join("\n") || JSON.stringify(value);
    const content = `${[...kind, key].join("/")}: ${text}`;
    const metadata = { [KIND]: kind.join("."), [KEY]: key, [VALUE]: value, [UPDATED]: new Date().toISOString() };
    for (let depth = 0; depth <= kind.length; depth++) metadata[prefix(depth)] = kind.slice(0, depth).join(".");
    if (found) {
      await this.memory.updateMemory(found.id, user, { content, metadata });
    } else {
      const type = KIND_TYPES.includes(kind[0]) ? kind[0] : "fact";
      await this.memory.remember(content, user, type, this.importance, { metadata });
    }
    return undefined;
  }

  async #search({ namespacePrefix, query, filter = {}, limit = 10, offset = 0 }) {
    const [user, kind] = split(namespacePrefix);
    const scope = { [prefix(kind.length)]: kind.join(".") };
    const size = Math.min(MAX_LIMIT, (offset + limit) * 4);
    const found = query?.trim()
      ? (await this.memory.search(query, user, size, { metadata: scope })).map((hit) => [hit.memory, hit.score])
      : (await this.memory.listMemories(user, { limit: size, metadata: scope })).map((record) => [record, undefined]);
    return found
      .filter(([record]) => matches(record.metadata[VALUE], filter))
      .slice(offset, offset + limit)
      .map(([record, score]) => ({ ...item(record), score }));
  }

  async #listNamespaces({ matchConditions = [], maxDepth, limit, offset }) {
    const users = matchConditions.filter((c) => c.matchType === "prefix" && c.path[0] && c.path[0] !== "*");
    if (users.length !== 1) {
      throw new InvalidNamespaceError("prefix: must name exactly one user (tiermem never lists across users)");
    }
    const user = users[0].path[0];
    const records = await this.memory.listMemories(user, { limit: MAX_LIMIT, metadata: { [prefix(0)]: "" } });
    const namespaces = new Map();
    for (const record of records) {
      const namespace = namespaceOf(record);
      if (!matchConditions.every((c) => fits(c, namespace))) continue;
      const shown = maxDepth === undefined ? namespace : namespace.slice(0, maxDepth);
      namespaces.set(shown.join("\u0000"), shown);
    }
    return [...namespaces.keys()].sort().slice(offset, offset + limit).map((k) => namespaces.get(k));
  }

  async #find(user, kind, key) {
    const [found] = await this.memory.listMemories(user, { limit: 1, metadata: { [KIND]: kind.join("."), [KEY]: key } });
    return found ?? null;
  }
}

/** [user, kind] of a namespace (the user first). */
function split(namespace) {
  if (!Array.isArray(namespace) || !namespace.length) {
    throw new InputError("namespace", "has no user id at position 0", "every namespace names the user whose memory it is");
  }
  for (const label of namespace) {
    if (typeof label !== "string" || !label || label.includes(".")) {
      throw new InvalidNamespaceError(`namespace: label ${JSON.stringify(label)} is empty, not text, or holds '.'`);
    }
  }
  return [namespace[0], namespace.slice(1)];
}

function namespaceOf(record) {
  const kind = record.metadata[KIND] ? record.metadata[KIND].split(".") : [];
  return [record.user_id, ...kind];
}

function item(record) {
  return {
    namespace: namespaceOf(record),
    key: record.metadata[KEY],
    value: record.metadata[VALUE] ?? {},
    createdAt: new Date(record.created_at),
    updatedAt: new Date(record.metadata[UPDATED] ?? record.created_at),
  };
}

function strings(value) {
  if (typeof value === "string") return value.trim() ? [value] : [];
  if (Array.isArray(value)) return value.flatMap(strings);
  if (value && typeof value === "object") return Object.values(value).flatMap(strings);
  return [];
}

/** Whether a value meets a LangGraph filter: equality, or $eq $ne $gt $gte $lt $lte. */
function matches(value, filter) {
  return Object.entries(filter).every(([key, condition]) => {
    const actual = value?.[key];
    if (condition && typeof condition === "object" && !Array.isArray(condition)) {
      return Object.entries(condition).every(([op, expected]) => compare(actual, op, expected));
    }
    return actual === condition;
  });
}

function compare(actual, op, expected) {
  switch (op) {
    case "$eq": return actual === expected;
    case "$ne": return actual !== expected;
    case "$gt": return actual > expected;
    case "$gte": return actual >= expected;
    case "$lt": return actual < expected;
    case "$lte": return actual <= expected;
    default: throw new InputError(`filter.${op}`, "is not an operator", "use $eq, $ne, $gt, $gte, $lt or $lte");
  }
}

function fits({ matchType, path }, namespace) {
  if (namespace.length < path.length) return false;
  const part = matchType === "prefix" ? namespace.slice(0, path.length) : namespace.slice(-path.length);
  return path.every((label, i) => label === "*" || label === part[i]);
}
