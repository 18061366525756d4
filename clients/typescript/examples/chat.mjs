// A chat loop with memory: each line read on stdin is a user turn; tiermem gives the
// context for it (the user's memories, the session's summary and recent turns), the
// OpenAI SDK answers from that context, and both turns are added to the session.
//
//   TIERMEM_URL=http://127.0.0.1:8765 OPENAI_API_KEY=sk-... node chat.mjs
//
// OPENAI_BASE_URL points the SDK at any server speaking OpenAI's protocol (vLLM,
// Ollama, llama.cpp); OPENAI_MODEL picks the model (default gpt-4o-mini).
import { createInterface } from "node:readline";
import OpenAI from "openai";
import { MemoryClient } from "tiermem";

const memory = new MemoryClient(process.env.TIERMEM_URL ?? "http://127.0.0.1:8765");
const openai = new OpenAI(); // OPENAI_API_KEY and OPENAI_BASE_URL from the environment
const model = process.env.OPENAI_MODEL ?? "gpt-4o-mini";
const user = process.env.CHAT_USER ?? "ana";
const session = process.env.CHAT_SESSION ?? `chat-${new Date().toISOString().slice(0, 10)}`;

await memory.remember("Ana is vegetarian and allergic to peanuts", user, "preference", 0.9);

for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  const context = await memory.getContext(line, user, session, 2000);
  const system = { role: "system", content: "You are a helpful assistant. Use what you know about the user." };
  const completion = await openai.chat.completions.create({
    model,
    messages: [system, ...context.messages, { role: "user", content: line }],
  });
  const reply = completion.choices[0].message.content ?? "";
  await memory.addMessages(
    [
      { role: "user", content: line },
      { role: "assistant", content: reply },
    ],
    user,
    session,
  );
  console.log(`assistant: ${reply}`);
  console.log(`  (context: ${context.items.length} items, ${context.total_tokens} tokens)`);
}
