// The client's own behaviour, against local HTTP servers scripted here: retries with
// backoff on a 503 and on a reset connection (never on a 4xx), the server's Retry-After
// on the error, typed errors from error bodies, input refused before anything is sent.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { test } from "node:test";

import * as tiermem from "../dist/index.js";
import { freePort } from "./server.mjs";

const { MemoryClient, StoreUnavailableError } = tiermem;

/** A server answering each request with the next of `replies` ("reset": the connection
 * is destroyed; else [status, body, headers]); the last one repeats. */
async function scripted(replies) {
  const seen = [];
  const server = createServer((request, response) => {
    let body = "";
    request.on("data", (chunk) => (body += chunk));
    request.on("end", () => {
      seen.push({ method: request.method, url: request.url, headers: request.headers, body });
      const reply = replies[Math.min(seen.length - 1, replies.length - 1)];
      if (reply === "reset") return request.socket.destroy();
      const [status, json, headers = {}] = reply;
      response.writeHead(status, { "content-type": "application/json", ...headers });
      response.end(JSON.stringify(json));
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${server.address().port}`;
  return { url, seen, close: () => new Promise((resolve) => server.close(resolve)) };
}

const FAST = { backoffMs: 1, maxBackoffMs: 20 };
const UNAVAILABLE = [503, { error: "StoreUnavailableError", field: null, message: "the store is down", fix: "" }, { "retry-after": "0" }];

test("a 503 is retried with backoff, then answered", async () => {
  const server = await scripted([UNAVAILABLE, UNAVAILABLE, [201, { id: "m1" }]]);
  const memory = new MemoryClient(server.url, FAST);
  assert.equal(await memory.remember("likes tea", "ana"), "m1");
  assert.equal(server.seen.length, 3);
  assert.deepEqual(server.seen.map((r) => r.body), Array(3).fill(server.seen[0].body));
  await server.close();
});

test("a 503 past the retries is StoreUnavailableError with the server's Retry-After", async () => {
  const [status, body] = UNAVAILABLE;
  const server = await scripted([[status, body, { "retry-after": "7" }]]);
  const memory = new MemoryClient(server.url, { ...FAST, maxRetries: 1 });
  await assert.rejects(memory.stats("ana"), (exc) => {
    assert.ok(exc instanceof StoreUnavailableError, exc.name);
    assert.equal(exc.retryAfter, 7);
    assert.equal(exc.message, "the store is down");
    return true;
  });
  assert.equal(server.seen.length, 2);
  await server.close();
});

test("a reset connection is retried", async () => {
  const server = await scripted(["reset", [200, { deleted: 3 }]]);
  const memory = new MemoryClient(server.url, FAST);
  assert.equal(await memory.forgetUser("ana"), 3);
  assert.equal(server.seen.length, 2);
  await server.close();
});

test("a 4xx is never retried and keeps its field and hint", async () => {
  const refusal = [422, { error: "InvalidRoleError", field: "role", message: "unknown role 'robot'", fix: "use one of user" }];
  const server = await scripted([refusal, [201, { ids: [] }]]);
  const memory = new MemoryClient(server.url, FAST);
  await assert.rejects(memory.getContext("q", "ana"), (exc) => {
    assert.ok(exc instanceof tiermem.InvalidRoleError && exc instanceof tiermem.InputError);
    assert.deepEqual([exc.name, exc.field, exc.problem, exc.hint], ["InvalidRoleError", "role", "unknown role 'robot'", "use one of user"]);
    assert.equal(exc.message, "role: unknown role 'robot' (use one of user)");
    return true;
  });
  assert.equal(server.seen.length, 1);
  await server.close();
});

test("a 401 is AuthenticationError, and the key is sent as a bearer token", async () => {
  const refused = [401, { error: "AuthenticationError", field: null, message: "unknown key", fix: "" }];
  const server = await scripted([refused]);
  const memory = new MemoryClient(server.url, { ...FAST, apiKey: "tm_secret" });
  await assert.rejects(memory.sessions("ana"), tiermem.AuthenticationError);
  assert.equal(server.seen[0].headers.authorization, "Bearer tm_secret");
  assert.equal(server.seen.length, 1);
  await server.close();
});

test("every error name the server sends is a class of that name", () => {
  for (const name of tiermem.ERROR_NAMES) {
    const error = tiermem.errorFromBody({ error: name, field: "f", message: "m", fix: "h" });
    assert.equal(error.constructor, tiermem[name]);
    assert.equal(error.name, name);
    assert.ok(error instanceof tiermem.TiermemError && error instanceof Error);
  }
  const unknown = tiermem.errorFromBody({ error: "SomethingNew", message: "m" });
  assert.equal(unknown.constructor, tiermem.TiermemError);
});

test("an unreachable server is StoreUnavailableError, and health says so without throwing", async () => {
  const memory = new MemoryClient(`http://127.0.0.1:${await freePort()}`, FAST);
  await assert.rejects(memory.stats("ana"), (exc) => exc instanceof StoreUnavailableError && /cannot reach/.test(exc.message));
  const health = await memory.health();
  assert.match(health.server, /^StoreUnavailableError: cannot reach the tiermem server/);
});

test("bad input is refused before anything is sent", async () => {
  const server = await scripted([[500, {}]]);
  const memory = new MemoryClient(server.url, FAST);
  const refused = [
    [() => memory.add("robot", "hi", "ana"), tiermem.InvalidRoleError, "role"],
    [() => memory.add("user", "hi", " "), tiermem.MissingUserError, "user_id"],
    [() => memory.add("user", "hi", "ana", null, { nmae: "x" }), tiermem.InvalidTypeError, "message.nmae"],
    [() => memory.add("user", 42, "ana"), tiermem.InvalidTypeError, "content"],
    [() => memory.add("user", { n: NaN }, "ana"), tiermem.InputError, "message"],
    [() => memory.addMessages([{ role: "user", content: "a" }, { role: "bot" }], "ana"), tiermem.InvalidRoleError, "messages[1].role"],
    [() => memory.addMessages([], "ana"), tiermem.InputError, "messages"],
    [() => memory.remember("x", "ana", "fact", NaN), tiermem.InvalidSizeError, "importance"],
    [() => memory.remember("x", "ana", "fact", 0.5, { metadata: { n: Infinity } }), tiermem.InputError, "metadata"],
    [() => memory.search("q", "ana", 10, { user_id: "bo" }), tiermem.InvalidTypeError, "filters.user_id"],
    [() => memory.search("q", "ana", 10, null, { minScore: 2 }), tiermem.InvalidSizeError, "min_score"],
    [() => memory.listMemories("ana", { offset: -1 }), tiermem.InvalidSizeError, "offset"],
    [() => memory.getMessage("", "ana"), tiermem.InputError, "message_id"],
    [() => memory.history("", "s"), tiermem.MissingUserError, "user_id"],
    [() => memory.facts("ana", { current: 1 }), tiermem.InvalidTypeError, "current"],
    [() => memory.forgetMessages("ana", 42), tiermem.InvalidTypeError, "message_ids"],
    [() => memory.flush(-1), tiermem.InvalidSizeError, "timeout"],
    [() => memory.users(100, 5), tiermem.InvalidTypeError, "after"],
    [() => memory.importArchive("not lines"), tiermem.InvalidTypeError, "archive"],
    [() => memory.importArchive(["{}"]), tiermem.InputError, "line 1"],
  ];
  for (const [call, error, field] of refused) {
    await assert.rejects(call, (exc) => exc.constructor === error && exc.field === field, String(call));
  }
  assert.equal(server.seen.length, 0);
  await server.close();
});

test("the package loads with no dependency and exports the whole contract", async () => {
  const names = [
    "add", "addMessages", "remember", "rememberMany", "updateMemory", "getContext", "search",
    "listMemories", "getMemory", "getMessage", "history", "recent", "sessions", "sessionSummary",
    "users", "synopsis", "generateSynopsis", "facts", "factHistory", "stats", "forget",
    "forgetMessages", "forgetSession", "forgetUser", "endSession", "extractFacts", "workStats",
    "failed", "retryFailed", "queueStatus", "health", "export", "importArchive", "flush", "close",
  ];
  const missing = names.filter((name) => typeof MemoryClient.prototype[name] !== "function");
  assert.deepEqual(missing, []);
  const { readFileSync } = await import("node:fs");
  const manifest = JSON.parse(readFileSync(new URL("../package.json", import.meta.url)));
  assert.equal(manifest.dependencies, undefined);
});

test("toAnthropic gives Anthropic's shape: system apart, tool calls as blocks, turns merged", () => {
  const call = { id: "c1", type: "function", function: { name: "weather", arguments: '{"city": "Oslo"}' } };
  const { system, messages } = tiermem.toAnthropic([
    { role: "system", content: "You know the user." },
    { role: "system", content: "Be brief." },
    { role: "user", content: "Weather in Oslo?" },
    { role: "assistant", content: null, tool_calls: [call] },
    { role: "tool", content: "4 degrees", tool_call_id: "c1" },
    { role: "user", content: [{ type: "text", text: "and tomorrow?" }] },
  ]);
  assert.equal(system, "You know the user.\n\nBe brief.");
  assert.deepEqual(messages, [
    { role: "user", content: [{ type: "text", text: "Weather in Oslo?" }] },
    { role: "assistant", content: [{ type: "tool_use", id: "c1", name: "weather", input: { city: "Oslo" } }] },
    {
      role: "user",
      content: [
        { type: "tool_result", tool_use_id: "c1", content: "4 degrees" },
        { type: "text", text: "and tomorrow?" },
      ],
    },
  ]);
});
