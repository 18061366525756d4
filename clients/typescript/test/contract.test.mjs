// The behaviour suite the Python faces share (tests/conformance/test_faces.py), on the
// TypeScript client against a real `tiermem serve`: the same arguments give the same
// results, and the same bad input the same typed error naming the same field.
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  ContentTooLargeError,
  InputError,
  InvalidRoleError,
  InvalidSizeError,
  InvalidTypeError,
  MemoryClient,
  MessageNotFoundError,
  MissingUserError,
  NotFoundError,
  toAnthropic,
} from "../dist/index.js";
import { newUser, serverUrl } from "./server.mjs";

const memory = new MemoryClient(await serverUrl());
const SECTIONS = ["synopsis", "summary", "retrieved", "recent"];
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const text = (context) => context.messages.map((m) => m.content ?? "").join("\n");

/** The call throws `error` (its exact class) naming `field` (or a field ending in it). */
async function refuses(call, error, field) {
  await assert.rejects(call, (exc) => {
    assert.equal(exc.constructor, error, `${exc.name}: ${exc.message}`);
    if (field !== undefined) assert.ok(exc.field === field || exc.field.replace(/[.0-9]+$/, "").endsWith(field), exc.field);
    return true;
  });
}

test("add returns the message and it is stored", async () => {
  const user = newUser();
  const message = await memory.add("user", "I adopted a cat called Miso", user, "s1", { name: "Ann" });
  assert.deepEqual([message.role, message.name, message.metadata.user_id], ["user", "Ann", user]);
  assert.ok(await memory.flush(60));
  const stored = await memory.listMemories(user, { memoryType: "message" });
  assert.deepEqual(stored.map((r) => r.metadata.message_id), [message.message_id]);
  assert.equal(stored[0].user_id, user);
  assert.equal(stored[0].session_id, "s1");
});

test("addMessages keeps order, ids and OpenAI's fields", async () => {
  const user = newUser();
  const history = [
    { role: "user", content: "What is the weather in Oslo?" },
    {
      role: "assistant",
      content: null,
      tool_calls: [{ id: "call_1", type: "function", function: { name: "weather", arguments: '{"city": "Oslo"}' } }],
    },
    { role: "tool", content: "4 degrees and rain", tool_call_id: "call_1" },
    { role: "assistant", content: "It is 4 degrees and raining in Oslo.", message_id: "mine-1" },
  ];
  const added = await memory.addMessages(history, user, "trip");
  assert.deepEqual(added.map((m) => m.role), ["user", "assistant", "tool", "assistant"]);
  assert.equal(added[1].tool_calls[0].function.name, "weather");
  assert.equal(added[3].message_id, "mine-1");
  await memory.flush(60);
  const context = await memory.getContext("weather in Oslo", user, "trip");
  const tool = context.messages.filter((m) => m.role === "tool");
  assert.ok(tool.length && tool[0].tool_call_id === "call_1");
});

test("sessions, history and work", async () => {
  const user = newUser();
  const first = await memory.add("user", "the first session starts", user, "a");
  await memory.addMessages([{ role: "user", content: "same line" }, { role: "user", content: "same line" }], user, "b");
  await memory.add("assistant", { answer: 42 }, user, "b");
  await memory.flush(60);
  const sessions = await memory.sessions(user);
  assert.deepEqual(sessions.map((s) => [s.session_id, s.messages]), [["b", 3], ["a", 1]]);
  assert.ok(sessions.every((s) => s.first_at <= s.last_at));
  assert.deepEqual((await memory.history(user, "b")).map((m) => m.content), ["same line", "same line", { answer: 42 }]);
  const [again] = await memory.history(user, "a");
  assert.equal(again.message_id, first.message_id);
  assert.equal(again.metadata.user_id, user);
  assert.deepEqual(await memory.workStats(user), { pending: 0, done: 4, failed: 0 });
  assert.deepEqual(await memory.failed(user), []);
  assert.equal(await memory.retryFailed(user), 0);
});

test("remember, search and filters", async () => {
  const user = newUser();
  const tea = await memory.remember("prefers green tea over coffee", user, "preference", 0.9);
  await memory.remember("works as a nurse in Bergen", user, "fact", 0.5, { metadata: { source: "chat" } });
  assert.match(tea, UUID);
  const hits = await memory.search("green tea", user, 5);
  assert.equal(hits[0].memory.id, tea);
  assert.equal(hits[0].memory.user_id, user);
  assert.equal(hits[0].memory.importance, 0.9);
  const facts = await memory.search("nurse tea", user, 10, { memory_type: "fact" }, { mode: "keyword" });
  assert.deepEqual(facts.map((h) => h.memory.content), ["works as a nurse in Bergen"]);
  assert.deepEqual(facts[0].memory.metadata, { source: "chat" });
});

test("search scores are relevance and minScore leaves out the rest", async () => {
  const user = newUser();
  for (const t of ["prefers green tea over coffee", "green tea with jasmine", "parks on level 3"]) {
    await memory.remember(t, user);
  }
  const hits = await memory.search("green tea", user, 50);
  const scores = hits.map((h) => h.score);
  assert.equal(hits.length, 3);
  assert.deepEqual(scores, [...scores].sort((a, b) => b - a));
  assert.ok(scores.every((s) => s > 0 && s < 1));
  for (const hit of hits) {
    assert.ok(hit.evidence.similarity !== null && hit.evidence.fused_rank !== null);
    assert.equal(hit.evidence.keywords, hit.memory.content.includes("level") ? 0 : 1);
  }
  const [first] = await memory.search("green tea", user, 1);
  assert.equal(first.score, hits.find((h) => h.memory.id === first.memory.id).score);
  for (const mode of ["hybrid", "vector", "keyword"]) {
    const found = await memory.search("green tea", user, 50, null, { mode });
    const least = found[1].score;
    const kept = await memory.search("green tea", user, 50, null, { mode, minScore: least });
    assert.ok(kept.length);
    assert.deepEqual(kept.map((h) => h.memory.id), found.filter((h) => h.score >= least).map((h) => h.memory.id));
  }
  assert.deepEqual(await memory.search("green tea", user, 10, null, { minScore: 1.0 }), []);
  for (const [bad, error] of [[1.5, InvalidSizeError], [-1, InvalidSizeError], ["1", InvalidTypeError]]) {
    await refuses(memory.search("green tea", user, 10, null, { minScore: bad }), error, "min_score");
  }
});

test("a context is explained and within its budget", async () => {
  const user = newUser();
  await memory.remember("is allergic to peanuts", user, "fact", 0.9);
  for (let i = 0; i < 12; i++) {
    await memory.add(i % 2 === 0 ? "user" : "assistant", `message number ${i} about cooking`, user, "s");
  }
  await memory.flush(60);
  const context = await memory.getContext("what food allergy", user, "s", 200);
  assert.equal(context.max_tokens, 200);
  assert.ok(context.total_tokens <= 200);
  assert.ok(context.items.length && context.items.every((i) => SECTIONS.includes(i.section)));
  assert.ok(context.items.every((i) => i.tokens > 0 && typeof i.score === "number" && i.source));
  assert.ok(text(context).includes("peanuts"));
  assert.ok(text(context).includes("message number 11 about cooking"));
  assert.ok(context.messages.every((m) => ["system", "user", "assistant", "tool"].includes(m.role)));
  const anthropic = toAnthropic(context);
  assert.ok(anthropic.messages.length && anthropic.messages.every((m) => ["user", "assistant"].includes(m.role)));
});

test("synopsis, generateSynopsis and stats", async () => {
  const user = newUser();
  await memory.remember("likes hiking in the mountains", user, "preference");
  const synopsis = await memory.synopsis(user);
  assert.equal(synopsis.user_id, user);
  assert.ok(`${synopsis.identity} ${synopsis.context}`.includes("hiking"));
  await memory.remember("collects vinyl records", user, "preference");
  const fresh = await memory.generateSynopsis(user);
  assert.ok(`${fresh.identity} ${fresh.context}`.includes("vinyl"));
  const stats = await memory.stats(user);
  assert.equal(stats.count, 2);
  assert.deepEqual(stats.by_type, { preference: 2 });
});

test("forget and updateMemory", async () => {
  const user = newUser();
  const id = await memory.remember("lives in Lyon", user);
  const updated = await memory.updateMemory(id, user, { content: "lives in Paris", importance: 0.7 });
  assert.deepEqual([updated.content, updated.importance], ["lives in Paris", 0.7]);
  assert.equal((await memory.getMemory(id, user)).content, "lives in Paris");
  assert.equal(await memory.forget(id, "someone else"), false);
  assert.equal(await memory.forget(id, user), true);
  assert.equal(await memory.forget(id, user), false);
  assert.equal(await memory.getMemory(id, user), null);
});

test("forgetUser erases everything", async () => {
  const user = newUser();
  await memory.remember("has two children", user);
  await memory.add("user", "my kids love football", user, "s");
  await memory.flush(60);
  assert.equal(await memory.forgetUser(user), 2);
  assert.deepEqual(await memory.search("children football", user), []);
  assert.equal((await memory.stats(user)).count, 0);
});

const ERRORS = [
  ["add robot", (m, u) => m.add("robot", "hi", u), InvalidRoleError, "role"],
  ["add no user", (m) => m.add("user", "hi", ""), MissingUserError, "user_id"],
  ["addMessages one", (m, u) => m.addMessages({ role: "user" }, u), InvalidTypeError, "messages"],
  ["add unknown field", (m, u) => m.add("user", "hi", u, null, { bogus: 1 }), InvalidTypeError, "message.bogus"],
  ["addMessages role", (m, u) => m.addMessages([{ role: "user", content: "a" }, { role: "robot" }], u), InvalidRoleError, "messages[1].role"],
  ["remember importance", (m, u) => m.remember("x", u, "fact", 2.0), InvalidSizeError, "importance"],
  ["remember type", (m, u) => m.remember("x", u, "gossip"), InputError, "memory_type"],
  ["remember blank", (m, u) => m.remember("   ", u), InputError, "content"],
  ["search k", (m, u) => m.search("tea", u, 0), InvalidSizeError, "k"],
  ["context budget", (m, u) => m.getContext("tea", u, null, 0), InvalidSizeError, "max_tokens"],
  ["forget id", (m, u) => m.forget("not-a-uuid", u), InputError, "memory_id"],
  ["context huge", (m, u) => m.getContext("tea", u, null, 1e18), InvalidSizeError, "max_tokens"],
  ["context bool", (m, u) => m.getContext("tea", u, null, true), InvalidTypeError, "max_tokens"],
  ["context float", (m, u) => m.getContext("tea", u, null, 2.5), InvalidTypeError, "max_tokens"],
  ["filter user", (m, u) => m.search("tea", u, 10, { user_id: "other" }), InvalidTypeError, "filters.user_id"],
  ["filter query", (m, u) => m.search("tea", u, 10, { query: "x" }), InvalidTypeError, "filters.query"],
  ["filter limit", (m, u) => m.search("tea", u, 10, { limit: 50 }), InvalidTypeError, "filters.limit"],
  ["filter mode", (m, u) => m.search("tea", u, 10, { mode: "vector" }), InvalidTypeError, "filters.mode"],
  ["filter bogus", (m, u) => m.search("tea", u, 10, { bogus: 1 }), InvalidTypeError, "filters.bogus"],
  ["search k bool", (m, u) => m.search("tea", u, true), InvalidTypeError, "k"],
  ["search k huge", (m, u) => m.search("tea", u, 1e18), InvalidSizeError, "k"],
  ["filter huge", (m, u) => m.search("tea", u, 10, { metadata: { n: 2 ** 64 } }), InvalidSizeError, "metadata.n"],
  ["filter NaN", (m, u) => m.search("tea", u, 10, { metadata: { n: NaN } }), InputError, "metadata.n"],
  ["list huge", (m, u) => m.listMemories(u, { metadata: { n: 2 ** 64 } }), InvalidSizeError, "metadata.n"],
  ["list NaN", (m, u) => m.listMemories(u, { metadata: { n: NaN } }), InputError, "metadata.n"],
  ["list limit", (m, u) => m.listMemories(u, { limit: 1e18 }), InvalidSizeError, "limit"],
  ["list limit bool", (m, u) => m.listMemories(u, { limit: true }), InvalidTypeError, "limit"],
  ["list offset", (m, u) => m.listMemories(u, { offset: 1e18 }), InvalidSizeError, "offset"],
  ["list offset bool", (m, u) => m.listMemories(u, { offset: true }), InvalidTypeError, "offset"],
  ["list offset <0", (m, u) => m.listMemories(u, { offset: -1 }), InvalidSizeError, "offset"],
  ["recent limit", (m, u) => m.recent(u, "s", 1e18), InvalidSizeError, "limit"],
  ["recent limit bool", (m, u) => m.recent(u, "s", true), InvalidTypeError, "limit"],
  ["failed 0", (m, u) => m.failed(u, 0), InvalidSizeError, "limit"],
  ["facts limit", (m, u) => m.facts(u, { limit: 1e18 }), InvalidSizeError, "limit"],
  ["facts current 1", (m, u) => m.facts(u, { current: 1 }), InvalidTypeError, "current"],
  ["facts current no", (m, u) => m.facts(u, { current: "no" }), InvalidTypeError, "current"],
  ["importance bool", (m, u) => m.remember("x", u, "fact", true), InvalidTypeError, "importance"],
  ["importance huge", (m, u) => m.remember("x", u, "fact", 1e30), InvalidSizeError, "importance"],
  ["importance NaN", (m, u) => m.remember("x", u, "fact", NaN), InvalidSizeError, "importance"],
  ["flush -1", (m) => m.flush(-1), InvalidSizeError, "timeout"],
  ["flush NaN", (m) => m.flush(NaN), InvalidSizeError, "timeout"],
  ["flush bool", (m) => m.flush(true), InvalidTypeError, "timeout"],
  ["update nothing", (m, u) => m.updateMemory(crypto.randomUUID(), u), InputError, "changes"],
  ["update missing", (m, u) => m.updateMemory(crypto.randomUUID(), u, { importance: 0.5 }), NotFoundError, undefined],
  ["update bad id", (m, u) => m.updateMemory("nope", u, { importance: 0.5 }), InputError, "memory_id"],
  ["update importance", (m, u) => m.updateMemory(crypto.randomUUID(), u, { importance: 7 }), InvalidSizeError, "importance"],
  ["get bad id", (m, u) => m.getMemory("nope", u), InputError, "memory_id"],
  ["list 0", (m, u) => m.listMemories(u, { limit: 0 }), InvalidSizeError, "limit"],
  ["list type", (m, u) => m.listMemories(u, { memoryType: "gossip" }), InputError, "memory_type"],
  ["recent no user", (m) => m.recent("", null), MissingUserError, "user_id"],
  ["forgetMessages 42", (m, u) => m.forgetMessages(u, 42), InvalidTypeError, "message_ids"],
  ["factHistory id", (m, u) => m.factHistory("nope", u), InputError, "memory_id"],
  ["facts 0", (m, u) => m.facts(u, { limit: 0 }), InvalidSizeError, "limit"],
  ["history session", (m, u) => m.history(u, "x".repeat(300)), InputError, "session_id"],
  ["summary no user", (m) => m.sessionSummary("", "s"), MissingUserError, "user_id"],
  ["summary session", (m, u) => m.sessionSummary(u, "x".repeat(300)), InputError, "session_id"],
  ["users 0", (m) => m.users(0), InvalidSizeError, "limit"],
  ["users huge", (m) => m.users(1e18), InvalidSizeError, "limit"],
  ["users bool", (m) => m.users(true), InvalidTypeError, "limit"],
  ["users after", (m) => m.users(100, 5), InvalidTypeError, "after"],
];

for (const [name, call, error, field] of ERRORS) {
  test(`typed error: ${name}`, async () => {
    await refuses(call(memory, newUser()), error, field);
  });
}

test("a long message is kept whole and one past the ceiling is refused", async () => {
  const user = newUser();
  const long = JSON.stringify({ lines: Array.from({ length: 2_000 }, (_, i) => `line ${i} of the log é`) });
  const added = await memory.add("user", long, user, "paste", { name: "Ann", metadata: { source: "log" } });
  const [stored] = await memory.history(user, "paste");
  assert.equal(stored.content, long);
  assert.deepEqual([stored.name, stored.metadata.source], ["Ann", "log"]);
  assert.deepEqual(await memory.getMessage(added.message_id, user), stored);
  const tooLong = "é".repeat(4_000_001);
  for (const call of [
    () => memory.add("user", tooLong, user, "paste"),
    () => memory.addMessages([{ role: "user", content: "fits" }, { role: "user", content: tooLong }], user, "paste"),
  ]) {
    await assert.rejects(call, (exc) => {
      assert.ok(exc instanceof ContentTooLargeError, exc.message);
      assert.ok(["message.content", "messages[1].content"].includes(exc.field), exc.field);
      assert.ok(exc.problem.includes("4,000,001") && exc.problem.includes("4,000,000"));
      assert.ok(exc.hint.includes("memory.max_message_chars"));
      return true;
    });
  }
  assert.deepEqual((await memory.history(user, "paste")).map((m) => m.message_id), [added.message_id]);
});

test("getMessage gives the user's message whole", async () => {
  const user = newUser();
  const said = await memory.add("user", "the first line", user, "s", { name: "Ann", metadata: { mood: "ok" } });
  const call = { id: "c1", type: "function", function: { name: "f", arguments: "{}" } };
  await memory.addMessages(
    [
      { role: "assistant", content: "an id a path could break", message_id: "a/../b é?#." },
      { role: "assistant", content: null, tool_calls: [call], message_id: "tool-1" },
    ],
    user,
    "s",
  );
  for (const message of await memory.history(user, "s")) {
    assert.deepEqual(await memory.getMessage(message.message_id, user), message);
  }
  assert.equal((await memory.getMessage(said.message_id, user)).metadata.mood, "ok");
  assert.deepEqual((await memory.getMessage("tool-1", user)).tool_calls, [call]);
  const other = `other-${crypto.randomUUID().slice(0, 8)}`;
  for (const [id, owner] of [["no-such-id", user], [said.message_id, other], ["..", user]]) {
    await assert.rejects(memory.getMessage(id, owner), (exc) => {
      assert.ok(exc instanceof MessageNotFoundError && exc instanceof NotFoundError, exc.message);
      assert.ok(!exc.message.includes("first line"));
      return true;
    });
  }
  for (const [bad, error] of [[42, InvalidTypeError], [null, InvalidTypeError], ["", InputError]]) {
    await refuses(memory.getMessage(bad, user), error, "message_id");
  }
  await refuses(memory.getMessage(said.message_id, ""), MissingUserError, "user_id");
});

test("users and the running summary of a session", async () => {
  const user = newUser();
  assert.equal(await memory.sessionSummary(user, "s"), null);
  for (let i = 0; i < 12; i++) await memory.add("user", `Line ${i} mentions the lighthouse keeper`, user, "s");
  assert.ok(await memory.flush(60));
  const summary = await memory.sessionSummary(user, "s");
  assert.ok(typeof summary === "string" && summary.includes("lighthouse"));
  assert.equal(await memory.sessionSummary(user, "another"), null);
  const everyone = [];
  for (;;) {
    const page = await memory.users(500, everyone.at(-1) ?? "");
    if (!page.length) break;
    everyone.push(...page);
  }
  assert.ok(everyone.includes(user) && new Set(everyone).size === everyone.length);
  const at = everyone.indexOf(user);
  assert.deepEqual(await memory.users(1, at ? everyone[at - 1] : ""), [user]);
});

test("health and the queue", async () => {
  const health = await memory.health();
  assert.ok(["store", "model", "cache"].every((part) => health[part] === "ok"), JSON.stringify(health));
  assert.deepEqual(await memory.queueStatus(), { pending: 0, failures: 0, last_error: null });
});

test("recent, endSession and forgetSession", async () => {
  const user = newUser();
  for (let i = 0; i < 5; i++) await memory.add(i % 2 === 0 ? "user" : "assistant", `line ${i} about sailing`, user, "s");
  await memory.add("user", "another session", user, "t");
  assert.deepEqual((await memory.recent(user, "s", 2)).map((m) => m.content), ["line 3 about sailing", "line 4 about sailing"]);
  const summary = await memory.endSession(user, "s");
  assert.ok(typeof summary === "string" && summary.includes("sailing"));
  assert.equal(await memory.forgetSession(user, "t"), 1);
  assert.deepEqual(await memory.history(user, "t"), []);
  assert.deepEqual((await memory.sessions(user)).map((s) => s.session_id), ["s"]);
});

test("forgetMessages", async () => {
  const user = newUser();
  const kept = await memory.add("user", "I keep bees on the roof", user, "s");
  const gone = await memory.add("user", "my PIN is 4321", user, "s");
  assert.equal(await memory.forgetMessages(user, [gone.message_id, "no-such-id"]), 1);
  assert.deepEqual((await memory.history(user, "s")).map((m) => m.message_id), [kept.message_id]);
  await memory.flush(60);
  assert.ok(!text(await memory.getContext("what is my PIN", user, "s")).includes("4321"));
});

test("extractFacts, facts and factHistory", async () => {
  const user = newUser();
  await memory.add("user", "My name is Ines and I live in Porto.", user, "s");
  const ids = await memory.extractFacts(user, "s");
  assert.ok(ids.length && ids.every((id) => typeof id === "string"));
  const facts = await memory.facts(user);
  assert.ok(ids.every((id) => facts.some((f) => f.id === id)));
  assert.equal((await memory.factHistory(ids[0], user)).at(-1).id, ids[0]);
  await refuses(memory.factHistory(crypto.randomUUID(), user), NotFoundError);
});

test("agentId is kept and filtered", async () => {
  const user = newUser();
  await memory.add("user", "planner agent line", user, "s", { agentId: "planner" });
  await memory.addMessages([{ role: "user", content: "coder agent line" }], user, "s", { agentId: "coder" });
  await memory.remember("a planner fact", user, "fact", 0.5, { agentId: "planner" });
  await memory.flush(60);
  const planner = await memory.listMemories(user, { agentId: "planner" });
  assert.deepEqual(planner.map((r) => r.content).sort(), ["a planner fact", "user: planner agent line"]);
  assert.deepEqual((await memory.listMemories(user, { agentId: "coder" })).map((r) => r.agent_id), ["coder"]);
});

test("listMemories pages and filters", async () => {
  const user = newUser();
  const ids = [];
  for (let i = 0; i < 5; i++) ids.push(await memory.remember(`note ${i}`, user, "context"));
  await memory.remember("a preference", user, "preference");
  const first = await memory.listMemories(user, { limit: 2, memoryType: "context" });
  const rest = await memory.listMemories(user, { limit: 10, offset: 2, memoryType: "context" });
  assert.deepEqual(new Set([...first, ...rest].map((r) => r.id)), new Set(ids));
  assert.equal((await memory.listMemories(user, { memoryType: ["context", "preference"] })).length, 6);
});

for (const odd of [".", "..", "a/../b", "%2E", "?x=1#y"]) {
  test(`every id a face accepts it can address: ${odd}`, async () => {
    const user = odd === "." || odd === ".." ? odd : `${odd}-${crypto.randomUUID().slice(0, 6)}`;
    await memory.forgetUser(user);
    const id = await memory.remember("reachable", user);
    assert.equal((await memory.getMemory(id, user)).user_id, user);
    assert.equal((await memory.synopsis(user)).user_id, user);
    assert.equal((await memory.stats(user)).count, 1);
    assert.equal(await memory.forgetUser(user), 1);
    assert.equal((await memory.stats(user)).count, 0);
  });
}

test("users are isolated on every operation", async () => {
  const user = newUser();
  const other = `other-${crypto.randomUUID().slice(0, 8)}`;
  const secret = await memory.remember("the vault code is 9911", user);
  const message = await memory.add("user", "my vault is in Bern", user, "s");
  await memory.flush(60);
  assert.equal(await memory.getMemory(secret, other), null);
  await refuses(memory.updateMemory(secret, other, { content: "hijacked" }), NotFoundError);
  assert.equal(await memory.forget(secret, other), false);
  assert.equal(await memory.forgetMessages(other, [message.message_id]), 0);
  assert.deepEqual(await memory.search("vault code", other), []);
  assert.ok(!text(await memory.getContext("vault code", other)).includes("9911"));
  assert.deepEqual(await memory.listMemories(other), []);
  assert.deepEqual(await memory.history(other, "s"), []);
  assert.equal((await memory.getMemory(secret, user)).content, "the vault code is 9911");
});

test("export then import restores the user", async () => {
  const user = newUser();
  await memory.add("user", "I grow tomatoes on the balcony", user, "garden");
  await memory.remember("grows tomatoes", user, "fact", 0.8, { metadata: { source: "chat" } });
  await memory.flush(60);
  const archive = [];
  for await (const line of memory.export(user)) archive.push(line);
  assert.equal(archive[0].user_id, user);
  assert.ok(archive.length >= 4);
  const twin = `copy-${crypto.randomUUID().slice(0, 8)}`;
  assert.deepEqual(await memory.importArchive(archive, twin), { messages: 1, memories: 2 });
  assert.deepEqual(await memory.importArchive(archive, twin), { messages: 0, memories: 0 });
  assert.deepEqual((await memory.history(twin, "garden")).map((m) => m.content), ["I grow tomatoes on the balcony"]);
  assert.equal((await memory.stats(twin)).count, 2);
  assert.equal((await memory.stats(user)).count, 2);
  const lines = archive.map((line) => JSON.stringify(line));
  const copy = `lines-${crypto.randomUUID().slice(0, 8)}`;
  assert.deepEqual(await memory.importArchive(lines, copy), { messages: 1, memories: 2 });
  await assert.rejects(memory.importArchive(archive.slice(0, -1), `cut-${crypto.randomUUID().slice(0, 8)}`), (exc) => {
    assert.ok(exc instanceof InputError && exc.field.startsWith("line"), `${exc.name} ${exc.field}`);
    return true;
  });
});
