/**
 * The results of the client's operations: the server's own response types, generated
 * from its OpenAPI document (src/generated/openapi.ts), under the names the Python
 * library gives them. Only `Message` is written here: the document carries messages as
 * free-form objects.
 */
import type { components } from "./generated/openapi.js";

type Schemas = components["schemas"];

/** A long-term memory (Python: `MemoryRecord`). */
export type MemoryRecord = Schemas["MemoryOut"];
/** One search hit: the memory, its relevance in [0, 1] and what it was made of
 * (Python: `SearchResult`). */
export type SearchHit = Schemas["HitOut"];
/** The similarity, keywords and ranks behind a hit's score. */
export type Evidence = Schemas["EvidenceOut"];
/** One item of a context: its section, source tier, score and tokens. */
export type ContextItem = Schemas["ContextItemOut"];
/** A user's synopsis (identity and current context). */
export type Synopsis = Schemas["SynopsisOut"];
/** A session of a user and its span (Python: `SessionInfo`). */
export type SessionInfo = Schemas["SessionOut"];
/** A message of the transcript with its work state (Python: `TranscriptRow`). */
export type TranscriptRow = Schemas["RowOut"];
/** Messages pending, done and failed (Python: `WorkStats`). */
export type WorkStats = Schemas["WorkStatsOut"];
/** Counts per type, time span, accesses and importance of a user (Python: `StoreStats`). */
export type StoreStats = Schemas["StatsOut"];
/** What an archive added, by kind. */
export type Imported = Schemas["ImportedOut"];
/** A memory of `rememberMany` (`created_at` optional). */
export type MemoryItem = Schemas["MemoryItem"];
/** The filters of `search`. */
export type SearchFilters = Schemas["Filters"];
/** A memory type (`"fact"`, `"preference"`, ...). */
export type MemoryType = Schemas["MemoryIn"]["memory_type"] & string;
/** A search mode. */
export type SearchMode = NonNullable<Schemas["SearchIn"]["mode"]>;

/** A chat message as OpenAI's and Anthropic's SDKs take it (`role`, `content`, and
 * `tool_calls` / `tool_call_id` where a tool was called). */
export interface ChatMessage {
  role: "system" | "user" | "assistant" | "tool";
  content: string | null;
  name?: string;
  tool_calls?: Record<string, unknown>[];
  tool_call_id?: string;
  [key: string]: unknown;
}

/** The context for a prompt: `messages` ready for a chat completion call, and `items`
 * saying why each part is there. */
export type Context = Omit<Schemas["ContextOut"], "messages"> & { messages: ChatMessage[] };

/** A message role. */
export type Role = "user" | "assistant" | "system" | "tool" | "agent_call" | "agent_response";

/** A conversation message as the server keeps it (Python: `Message.to_dict()`). */
export interface Message {
  role: Role;
  content: string | Record<string, unknown> | unknown[] | null;
  message_id: string;
  name?: string;
  tool_calls?: Record<string, unknown>[];
  tool_call_id?: string;
  agent_calls?: Record<string, unknown>[];
  structured_data?: Record<string, unknown>;
  images?: string[];
  metadata: Record<string, unknown>;
  /** ISO 8601 */
  timestamp: string;
}

/** A message to add: OpenAI's shape or a `Message` (`message_id` and `timestamp`
 * optional: made when absent). */
export type MessageInput = Partial<Message> & { role: string };

/** One line of an archive (docs/export.md): the header first, then messages and memories. */
export type ArchiveLine = Record<string, unknown>;
