/**
 * MemoryClient: the contract of tiermem (Python's `MemoryAPI`) over HTTP, for Node and
 * TypeScript. Every operation of the Python `MemoryClient` in camelCase, with the same
 * parameters and defaults: positional ones stay positional, keyword-only ones are an
 * options object. Results are the server's JSON, typed from its OpenAPI document; the
 * server's errors are thrown as the classes of the same name (./errors.ts).
 */
import {
  MESSAGE_FIELDS,
  checkContent,
  checkFlag,
  checkJson,
  checkLimit,
  checkMessageId,
  checkMessageIds,
  checkFilters,
  checkRole,
  checkSearchFilters,
  checkTextId,
  checkTimeout,
  checkUnit,
  checkUserId,
  isIterable,
  isRecord,
  refuseUnknown,
  typeName,
} from "./checks.js";
import { InputError, InvalidTypeError, NotFoundError, TiermemError } from "./errors.js";
import { Transport, errorOf, segment, type Request, type TransportOptions } from "./http.js";
import type {
  ArchiveLine,
  Context,
  Imported,
  MemoryItem,
  MemoryRecord,
  MemoryType,
  Message,
  MessageInput,
  SearchFilters,
  SearchHit,
  SearchMode,
  SessionInfo,
  StoreStats,
  Synopsis,
  TranscriptRow,
  WorkStats,
} from "./types.js";

export const DEFAULT_URL = "http://127.0.0.1:8765";

/** The client's options: a tenant's key, the timeout and the retries. */
export type ClientOptions = TransportOptions;

/** `add`'s options: the message's other fields, its metadata and agent. */
export interface AddOptions {
  timestamp?: string | Date;
  metadata?: Record<string, unknown>;
  agentId?: string | null;
  messageId?: string;
  name?: string;
  toolCalls?: Record<string, unknown>[];
  toolCallId?: string;
  agentCalls?: Record<string, unknown>[];
  structuredData?: Record<string, unknown>;
  images?: string[];
}

/** `remember`'s keyword options. */
export interface RememberOptions {
  sessionId?: string | null;
  agentId?: string | null;
  metadata?: Record<string, unknown> | null;
}

/** What `updateMemory` changes (at least one). */
export interface MemoryChanges {
  content?: string;
  memoryType?: MemoryType;
  importance?: number;
  metadata?: Record<string, unknown>;
}

/** `search`'s keyword options. */
export interface SearchOptions {
  mode?: SearchMode;
  minScore?: number;
}

/** `listMemories`' page and filters. */
export interface ListOptions {
  limit?: number;
  offset?: number;
  memoryType?: MemoryType | MemoryType[] | null;
  sessionId?: string | null;
  agentId?: string | null;
  createdAfter?: string | Date | null;
  createdBefore?: string | Date | null;
  metadata?: Record<string, string | number | boolean | null> | null;
}

let counter = 0;
const ID_PREFIX = `msg_${Array.from(crypto.getRandomValues(new Uint8Array(6)), (b) => b.toString(16).padStart(2, "0")).join("")}`;

/** A process-unique message id, as the Python library makes them. */
function messageId(): string {
  counter += 1;
  return `${ID_PREFIX}_${counter.toString(16)}`;
}

function timeText(value: unknown, name: string): string {
  if (value instanceof Date) return value.toISOString();
  if (typeof value === "string") return value;
  throw new InvalidTypeError(name, `cannot read ${typeName(value)} as a time`, "pass a Date or an ISO-8601 string");
}

/** A message of the user's session, checked as the library checks it (errors named
 * after `where`: `message`, or `messages[i]` in a history). */
function buildMessage(
  raw: Record<string, unknown>,
  userId: string,
  sessionId: string | null,
  where: string,
): Message {
  const { role, content = null, metadata, timestamp, message_id, ...fields } = raw;
  const named = (field: string) => (where === "message" ? field : `${where}.${field}`);
  refuseUnknown(Object.keys(fields), Object.values(MESSAGE_FIELDS), where, "a message field");
  try {
    checkRole(role);
    checkContent(content);
  } catch (exc) {
    if (where === "message" || !(exc instanceof InputError)) throw exc;
    const Moved = exc.constructor as new (field: string, problem: string, hint: string) => InputError;
    throw new Moved(named(exc.field ?? ""), exc.problem, exc.hint);
  }
  if (metadata !== undefined && metadata !== null && !isRecord(metadata)) {
    throw new InvalidTypeError("metadata", `expected a dict, got ${typeName(metadata)}`);
  }
  const meta: Record<string, unknown> = { ...(metadata ?? {}), user_id: userId };
  if (sessionId !== null) meta.session_id = sessionId;
  const message = {
    role,
    content,
    message_id: message_id ?? messageId(),
    ...fields,
    metadata: meta,
    timestamp: timestamp === undefined || timestamp === null ? new Date().toISOString() : timeText(timestamp, named("timestamp")),
  } as Message;
  checkJson(message, where);
  return message;
}

/** A user's resource path, the id checked as the library checks it. */
function userPath(userId: unknown, rest = ""): string {
  return `/v1/users/${segment(checkUserId(userId), "user_id")}${rest ? `/${rest}` : ""}`;
}

function memoryPath(memoryId: unknown): string {
  return `/v1/memories/${segment(memoryId, "memory_id")}`;
}

/** The JSON body of a request: non-finite numbers refused, naming their top-level key. */
function body(values: Record<string, unknown>): Record<string, unknown> {
  for (const [key, value] of Object.entries(values)) checkJson(value, key);
  return values;
}

/** tiermem's memory, served by `tiermem serve` at `url`: every operation of the Python
 * `MemoryClient`, in camelCase. */
export class MemoryClient {
  readonly url: string;
  private readonly http: Transport;

  /**
   * @param url the server's base URL (default http://127.0.0.1:8765).
   * @param options `apiKey` (a tenant's key; none in development mode), `timeoutMs`,
   *   `maxRetries`, `backoffMs`, `maxBackoffMs`, `fetch`.
   */
  constructor(url: string = DEFAULT_URL, options: ClientOptions = {}) {
    this.http = new Transport(url, options);
    this.url = this.http.url;
  }

  /** Send one request; its JSON answer. */
  #call<T>(request: Request): Promise<T> {
    return this.http.json<T>(request);
  }

  // -- writing --

  /** Add one message of a conversation; durable when this resolves. */
  async add(
    role: string,
    content: Message["content"],
    userId: string,
    sessionId: string | null = null,
    options: AddOptions = {},
  ): Promise<Message> {
    const { agentId = null, ...rest } = options;
    const raw: Record<string, unknown> = { role, content };
    for (const [key, value] of Object.entries(rest)) {
      if (value === undefined) continue;
      raw[key === "metadata" ? key : MESSAGE_FIELDS[key] ?? key] = value;
    }
    refuseUnknown(Object.keys(rest), [...Object.keys(MESSAGE_FIELDS), "metadata"], "message", "a message field");
    checkUserId(userId);
    checkTextId(sessionId, "session_id");
    const message = buildMessage(raw, userId, sessionId, "message");
    return (await this.#append([message], userId, sessionId, agentId))[0];
  }

  /** Add a history (OpenAI-shaped messages or `Message`s), all or none. */
  async addMessages(
    messages: Iterable<MessageInput>,
    userId: string,
    sessionId: string | null = null,
    options: { agentId?: string | null } = {},
  ): Promise<Message[]> {
    checkUserId(userId);
    checkTextId(sessionId, "session_id");
    if (!isIterable(messages) || typeof messages === "string") {
      throw new InvalidTypeError("messages", `expected a list of messages, got ${typeName(messages)}`, "wrap a single message in a list");
    }
    const batch = [...messages].map((raw, i) => {
      if (!isRecord(raw)) throw new InvalidTypeError(`messages[${i}]`, "expected a Message or a message dict");
      return buildMessage(raw, userId, sessionId, `messages[${i}]`);
    });
    if (!batch.length) throw new InputError("messages", "is empty", "pass at least one message");
    return this.#append(batch, userId, sessionId, options.agentId ?? null);
  }

  async #append(
    messages: Message[],
    userId: string,
    sessionId: string | null,
    agentId: string | null,
  ): Promise<Message[]> {
    const json = { user_id: userId, session_id: sessionId, agent_id: agentId, messages };
    await this.#call({ method: "POST", path: "/v1/messages", json });
    return messages;
  }

  /** Store a fact, preference or other memory now; its id. */
  async remember(
    content: string,
    userId: string,
    memoryType: MemoryType = "fact",
    importance = 0.5,
    options: RememberOptions = {},
  ): Promise<string> {
    if (typeof importance === "number" && !Number.isFinite(importance)) checkUnit(importance, "importance");
    const json = body({
      content,
      user_id: userId,
      memory_type: memoryType,
      importance,
      session_id: options.sessionId ?? null,
      agent_id: options.agentId ?? null,
      metadata: options.metadata ?? null,
    });
    return (await this.#call<{ id: string }>({ method: "POST", path: "/v1/memories", json })).id;
  }

  /** Store several memories in one transaction, all or none; their ids, in order. */
  async rememberMany(memories: Iterable<MemoryItem>, userId: string): Promise<string[]> {
    const list = isIterable(memories) && typeof memories !== "string" ? [...memories] : memories;
    const json = body({ user_id: userId, memories: list });
    return (await this.#call<{ ids: string[] }>({ method: "POST", path: "/v1/batch/memories", json })).ids;
  }

  /** Change a memory's content, type, importance or metadata; the new record. */
  async updateMemory(memoryId: string, userId: string, changes: MemoryChanges = {}): Promise<MemoryRecord> {
    const { content, memoryType, importance, metadata } = changes;
    if (typeof importance === "number" && !Number.isFinite(importance)) checkUnit(importance, "importance");
    const given = { content, memory_type: memoryType, importance, metadata };
    const json = body(Object.fromEntries(Object.entries(given).filter(([, v]) => v !== undefined && v !== null)));
    return this.#call({ method: "PATCH", path: memoryPath(memoryId), json, params: { user_id: userId } });
  }

  // -- reading --

  /** The context for `query`, fitted to `maxTokens` and explained. */
  getContext(
    query: string,
    userId: string,
    sessionId: string | null = null,
    maxTokens: number | null = null,
  ): Promise<Context> {
    const json = body({ query, user_id: userId, session_id: sessionId, max_tokens: maxTokens });
    return this.#call({ method: "POST", path: "/v1/context", json });
  }

  /** The user's memories best matching `query`, best first; each hit's `score` is its
   * relevance in [0, 1], and `minScore` leaves out those that score less. */
  async search(
    query: string,
    userId: string,
    k = 10,
    filters: SearchFilters | null = null,
    options: SearchOptions = {},
  ): Promise<SearchHit[]> {
    const { mode = "hybrid", minScore = 0.0 } = options;
    if (filters !== null) {
      checkUserId(userId);
      checkSearchFilters(filters);
      checkFilters(filters.memory_type, filters.metadata);
    }
    checkUnit(minScore, "min_score");
    const json = body({ query, user_id: userId, k, filters, mode, min_score: minScore });
    return (await this.#call<{ results: SearchHit[] }>({ method: "POST", path: "/v1/search", json })).results;
  }

  /** A page of the user's memories, newest first (`metadata`: top-level keys equal to
   * these scalar values). */
  async listMemories(userId: string, options: ListOptions = {}): Promise<MemoryRecord[]> {
    const { limit = 100, offset = 0, memoryType, sessionId, agentId, createdAfter, createdBefore, metadata } = options;
    checkUserId(userId);
    checkLimit(offset, "offset", 0);
    checkFilters(memoryType, metadata);
    const params = {
      user_id: userId,
      limit,
      cursor: offset ? String(offset) : null,
      memory_type: memoryType,
      session_id: sessionId,
      agent_id: agentId,
      created_after: createdAfter instanceof Date ? createdAfter.toISOString() : createdAfter,
      created_before: createdBefore instanceof Date ? createdBefore.toISOString() : createdBefore,
      metadata: metadata === null || metadata === undefined ? null : JSON.stringify(metadata),
    };
    const page = await this.#call<{ memories: MemoryRecord[] }>({ method: "GET", path: "/v1/memories", params });
    return page.memories;
  }

  /** One memory of the user; null if the user has none with this id. */
  async getMemory(memoryId: string, userId: string): Promise<MemoryRecord | null> {
    const response = await this.http.send({ method: "GET", path: memoryPath(memoryId), params: { user_id: userId } });
    if (response.ok) return (await response.json()) as MemoryRecord;
    const error = await errorOf(response);
    if (response.status === 404 && error.constructor === NotFoundError) return null;
    throw error;
  }

  /** One message of the user, whole (a context marks a long message's excerpts with its
   * id); MessageNotFoundError if the user has none with this id. */
  async getMessage(messageId: string, userId: string): Promise<Message> {
    const user = checkUserId(userId);
    const path = `/v1/messages/${segment(checkMessageId(messageId), "message_id")}`;
    return (await this.#call<{ message: Message }>({ method: "GET", path, params: { user_id: user } })).message;
  }

  /** Every message of a session, in order, whole. */
  async history(userId: string, sessionId: string | null = null): Promise<Message[]> {
    const path = userPath(userId, "messages");
    return (await this.#call<{ messages: Message[] }>({ method: "GET", path, params: { session_id: sessionId } })).messages;
  }

  /** The newest `limit` messages of a session, oldest first. */
  async recent(userId: string, sessionId: string | null = null, limit = 20): Promise<Message[]> {
    const params = { session_id: sessionId, limit };
    return (await this.#call<{ messages: Message[] }>({ method: "GET", path: userPath(userId, "recent"), params })).messages;
  }

  /** The user's sessions, most recently active first. */
  async sessions(userId: string): Promise<SessionInfo[]> {
    return (await this.#call<{ sessions: SessionInfo[] }>({ method: "GET", path: userPath(userId, "sessions") })).sessions;
  }

  /** The running summary of the session's messages older than the recent window; null
   * while there is none. */
  async sessionSummary(userId: string, sessionId: string | null = null): Promise<string | null> {
    const path = userPath(userId, "sessions/summary");
    return (await this.#call<{ summary: string | null }>({ method: "GET", path, params: { session_id: sessionId } })).summary;
  }

  /** The users by id, in order, `limit` of them after `after` (the last id of the page
   * before): every user of the server in development mode, the tenant's with a key. */
  async users(limit = 100, after = ""): Promise<string[]> {
    if (typeof after !== "string") throw new InvalidTypeError("after", `must be a str, got ${typeName(after)}`);
    const params = { limit, cursor: after || null };
    return (await this.#call<{ users: string[] }>({ method: "GET", path: "/v1/users", params })).users;
  }

  /** The user's synopsis (cached; generated on a miss). */
  synopsis(userId: string): Promise<Synopsis> {
    return this.#call({ method: "GET", path: userPath(userId, "synopsis") });
  }

  /** Regenerate and cache the user's synopsis now. */
  generateSynopsis(userId: string): Promise<Synopsis> {
    return this.#call({ method: "POST", path: userPath(userId, "synopsis") });
  }

  /** Facts extracted from the user's conversations, newest first. */
  async facts(userId: string, options: { current?: boolean; limit?: number } = {}): Promise<MemoryRecord[]> {
    const { current = true, limit = 1000 } = options;
    const path = userPath(userId, "facts");
    const params = { current: checkFlag(current, "current"), limit };
    return (await this.#call<{ facts: MemoryRecord[] }>({ method: "GET", path, params })).facts;
  }

  /** Every version of a fact, oldest first. */
  async factHistory(memoryId: string, userId: string): Promise<MemoryRecord[]> {
    const path = userPath(userId, `facts/${segment(memoryId, "memory_id")}/history`);
    return (await this.#call<{ versions: MemoryRecord[] }>({ method: "GET", path })).versions;
  }

  /** Counts per type, time span, access and importance figures of the user. */
  stats(userId: string): Promise<StoreStats> {
    return this.#call({ method: "GET", path: userPath(userId, "stats") });
  }

  // -- forgetting --

  /** Delete one memory and what was derived from it; false if there was none. */
  async forget(memoryId: string, userId: string): Promise<boolean> {
    const request: Request = { method: "DELETE", path: memoryPath(memoryId), params: { user_id: userId } };
    return (await this.#call<{ deleted: boolean }>(request)).deleted;
  }

  /** Delete these messages of the user; how many went. */
  async forgetMessages(userId: string, messageIds: Iterable<string> | string): Promise<number> {
    const json = { message_ids: checkMessageIds(messageIds) };
    return (await this.#call<{ deleted: number }>({ method: "POST", path: userPath(userId, "messages/forget"), json })).deleted;
  }

  /** Delete a session: its messages, summary and index lines. */
  async forgetSession(userId: string, sessionId: string | null = null): Promise<number> {
    const json = { session_id: sessionId };
    return (await this.#call<{ deleted: number }>({ method: "POST", path: userPath(userId, "sessions/forget"), json })).deleted;
  }

  /** Erase everything of the user; how many long-term memories went. */
  async forgetUser(userId: string): Promise<number> {
    return (await this.#call<{ deleted: number }>({ method: "DELETE", path: userPath(userId) })).deleted;
  }

  // -- sessions, background work, lifecycle --

  /** Fold a session into its final summary; the summary. */
  async endSession(userId: string, sessionId: string | null = null): Promise<string | null> {
    const json = { session_id: sessionId };
    return (await this.#call<{ summary: string | null }>({ method: "POST", path: userPath(userId, "sessions/end"), json })).summary;
  }

  /** Extract facts from the session's unread messages now; the facts' ids. */
  async extractFacts(userId: string, sessionId: string | null = null): Promise<string[]> {
    const json = { session_id: sessionId };
    return (await this.#call<{ ids: string[] }>({ method: "POST", path: userPath(userId, "facts/extract"), json })).ids;
  }

  /** Messages pending, done and failed (one user's, or everyone's in development mode). */
  async workStats(userId: string | null = null): Promise<WorkStats> {
    if (userId === null) {
      const work = await this.#call<{ store: WorkStats | null }>({ method: "GET", path: "/v1/work" });
      if (work.store === null) {
        throw new InputError("user_id", "is required with a tenant's key", "ask for one user's work_stats");
      }
      return work.store;
    }
    const work = await this.#call<WorkStats>({ method: "GET", path: userPath(userId, "work"), params: { limit: 1 } });
    return { pending: work.pending, done: work.done, failed: work.failed };
  }

  /** The user's messages that could not be indexed, with their errors. */
  async failed(userId: string, limit = 100): Promise<TranscriptRow[]> {
    const path = userPath(userId, "work");
    return (await this.#call<{ rows: TranscriptRow[] }>({ method: "GET", path, params: { limit } })).rows;
  }

  /** Queue the user's failed messages again; how many. */
  async retryFailed(userId: string): Promise<number> {
    return (await this.#call<{ retried: number }>({ method: "POST", path: userPath(userId, "work/retry") })).retried;
  }

  /** The answering server process's queue of messages not yet in its store. */
  async queueStatus(): Promise<{ pending: number; failures: number; last_error: string | null }> {
    const { pending, failures, last_error } = await this.#call<{ pending: number; failures: number; last_error: string | null }>({ method: "GET", path: "/v1/work" });
    return { pending, failures, last_error };
  }

  /** Whether each part of the server (store, model, cache) answers: "ok" or what failed,
   * by part. Never throws: a server that cannot be reached is
   * `{server: "StoreUnavailableError: ..."}`. */
  async health(): Promise<Record<string, string>> {
    try {
      const ready = await this.#call<{ checks: Record<string, string> }>({ method: "GET", path: "/readyz", accept: [503] });
      return Object.fromEntries(Object.entries(ready.checks).map(([k, v]) => [k, String(v)]));
    } catch (exc) {
      if (!(exc instanceof TiermemError)) throw exc;
      return { server: `${exc.name}: ${exc.message}`.slice(0, 300) };
    }
  }

  // -- moving a user's data --

  /** The user's archive (docs/export.md), one object per JSON line, streamed. */
  async *export(userId: string, options: { includeVectors?: boolean } = {}): AsyncGenerator<ArchiveLine> {
    const includeVectors = options.includeVectors ?? false;
    if (typeof includeVectors !== "boolean") throw new InvalidTypeError("include_vectors", "must be a bool");
    const response = await this.http.send({
      method: "GET",
      path: userPath(userId, "export"),
      params: { include_vectors: String(includeVectors) },
    });
    if (!response.ok) throw await errorOf(response);
    const decoder = new TextDecoder();
    let rest = "";
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      rest += decoder.decode(chunk, { stream: true });
      const lines = rest.split("\n");
      rest = lines.pop() ?? "";
      for (const line of lines) if (line.trim()) yield JSON.parse(line) as ArchiveLine;
    }
    rest += decoder.decode();
    if (rest.trim()) yield JSON.parse(rest) as ArchiveLine;
  }

  /** Restore an archive (lines of text or objects, e.g. what `export` gave) as its own
   * user or as `userId`, all or nothing; what was added, by kind (again: nothing). */
  async importArchive(
    archive: Iterable<string | ArchiveLine> | AsyncIterable<string | ArchiveLine>,
    userId: string | null = null,
  ): Promise<Imported> {
    if (typeof archive === "string" || !(isIterable(archive) || Symbol.asyncIterator in Object(archive))) {
      throw new InvalidTypeError("archive", "expected an iterable of lines", "pass a list of lines or export()'s objects");
    }
    const lines: string[] = [];
    for await (const item of archive as AsyncIterable<string | ArchiveLine>) {
      const line = typeof item === "string" ? item : isRecord(item) ? JSON.stringify(item) : null;
      if (line === null) throw new InvalidTypeError("archive", `holds a ${typeName(item)}, not a line`);
      if (line.trim()) lines.push(line.replace(/\n$/, ""));
    }
    const owner = userId ?? archiveUser(lines[0] ?? "");
    const request: Request = { method: "POST", path: userPath(owner, "import"), ndjson: lines.join("\n") };
    return this.#call(request);
  }

  /** Wait until the server's pending work is done (at most 60 s); false on timeout. */
  async flush(timeout: number | null = null): Promise<boolean> {
    const seconds = checkTimeout(timeout);
    const json = { timeout: seconds === null ? 60.0 : Math.min(seconds, 60.0) };
    const request: Request = { method: "POST", path: "/v1/flush", json, waitMs: json.timeout * 1000 };
    return (await this.#call<{ done: boolean }>(request)).done;
  }

  /** Nothing to release: fetch pools its connections per process. Kept so code written
   * against the contract can close any face. */
  async close(): Promise<void> {}
}

/** The user an archive's header names. */
function archiveUser(header: string): string {
  let data: unknown = null;
  try {
    data = JSON.parse(header);
  } catch {
    // not JSON: not a header
  }
  const userId = isRecord(data) ? data.user_id : undefined;
  if (typeof userId !== "string") throw new InputError("line 1", "is not a tiermem-archive header", "pass userId");
  return userId;
}
