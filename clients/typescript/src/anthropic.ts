/**
 * A context's messages for Anthropic's Messages API, as Python's `Context.to_anthropic()`
 * gives them: system messages joined into `system`, assistant tool calls as `tool_use`
 * blocks, tool results as `tool_result` blocks in a user turn, and consecutive turns of
 * one role merged (the API asks for alternation).
 */
import type { ChatMessage, Context } from "./types.js";

/** A content block of Anthropic's Messages API. */
export type AnthropicBlock = Record<string, unknown> & { type: string };

/** One turn of Anthropic's Messages API. */
export interface AnthropicMessage {
  role: "user" | "assistant";
  content: AnthropicBlock[];
}

/** `{ system, messages }` for `anthropic.messages.create(...)` (`system` null when the
 * context has none). */
export function toAnthropic(context: Context | ChatMessage[]): {
  system: string | null;
  messages: AnthropicMessage[];
} {
  const system: string[] = [];
  const messages: AnthropicMessage[] = [];
  for (const message of Array.isArray(context) ? context : context.messages) {
    if (message.role === "system") {
      system.push(text(message.content));
      continue;
    }
    const [role, blocks] = turn(message);
    const last = messages.at(-1);
    if (last && last.role === role) last.content.push(...blocks);
    else messages.push({ role, content: blocks });
  }
  return { system: system.length ? system.join("\n\n") : null, messages };
}

function turn(message: ChatMessage): ["user" | "assistant", AnthropicBlock[]] {
  if (message.role === "tool") {
    return ["user", [{ type: "tool_result", tool_use_id: message.tool_call_id, content: text(message.content) }]];
  }
  const blocks: AnthropicBlock[] = [];
  const content: unknown = message.content;
  if (typeof content === "string" && content) blocks.push({ type: "text", text: content });
  else if (Array.isArray(content)) blocks.push(...content.map(part));
  for (const call of message.tool_calls ?? []) {
    const fn = call.function as { name: string; arguments?: unknown };
    blocks.push({ type: "tool_use", id: call.id, name: fn.name, input: toolInput(fn.arguments) });
  }
  if (!blocks.length) blocks.push({ type: "text", text: "" });
  return [message.role === "assistant" ? "assistant" : "user", blocks];
}

function part(item: unknown): AnthropicBlock {
  const value = item as { type?: string; text?: string; image_url?: { url: string } };
  if (value?.type === "image_url" && value.image_url) {
    const url = value.image_url.url;
    const data = /^data:([\w/+.-]+);base64,(.*)$/s.exec(url);
    const source = data ? { type: "base64", media_type: data[1], data: data[2] } : { type: "url", url };
    return { type: "image", source };
  }
  if (value?.type === "text") return { type: "text", text: value.text ?? "" };
  return { type: "text", text: text([item]) };
}

function toolInput(args: unknown): unknown {
  if (args && typeof args === "object") return args;
  if (!args) return {};
  try {
    return JSON.parse(String(args));
  } catch {
    return { arguments: args };
  }
}

/** Plain text of any message content: objects as JSON, text parts joined by newlines. */
function text(content: unknown): string {
  if (typeof content === "string") return content;
  if (content === null || content === undefined) return "";
  if (!Array.isArray(content)) return JSON.stringify(content);
  return content
    .map((p) => (typeof p === "string" ? p : typeof p?.text === "string" ? p.text : p?.content))
    .filter((p) => typeof p === "string")
    .join("\n");
}
