/**
 * tiermem for Node and TypeScript: `MemoryClient`, the typed errors and the result types.
 *
 *     import { MemoryClient } from "tiermem";
 *     const memory = new MemoryClient("http://127.0.0.1:8765", { apiKey });
 */
export { toAnthropic } from "./anthropic.js";
export type { AnthropicBlock, AnthropicMessage } from "./anthropic.js";
export { DEFAULT_URL, MemoryClient } from "./client.js";
export type { AddOptions, ClientOptions, ListOptions, MemoryChanges, RememberOptions, SearchOptions } from "./client.js";
export * from "./errors.js";
export type * from "./types.js";
export type { components, paths, operations } from "./generated/openapi.js";
