// tiermem inspector: plain JS over the /v1 API (no build step). Every text is set with
// textContent, never as HTML, so stored content cannot inject markup.
"use strict";

const state = { key: sessionStorage.getItem("tiermem-key") || "", user: null, session: undefined };
const $ = (id) => document.getElementById(id);

function showError(message, box = $("error")) {
  box.textContent = message;
  box.hidden = !message;
}

// api() shows its errors in the page's banner; a form passes its own box, next to it.
async function api(method, path, body, errorBox = $("error")) {
  const headers = { "Content-Type": "application/json" };
  if (state.key) headers.Authorization = "Bearer " + state.key;
  const answer = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const data = await answer.json().catch(() => ({}));
  if (!answer.ok) {
    const text = `${data.error || answer.status}: ${data.field ? data.field + ": " : ""}${data.message || ""}${data.fix ? " (" + data.fix + ")" : ""}`;
    showError(text, errorBox);
    throw new Error(text);
  }
  showError("", errorBox);
  return data;
}

const enc = encodeURIComponent;

function cell(row, text) {
  const td = document.createElement("td");
  td.textContent = text;
  row.appendChild(td);
  return td;
}

function linkItem(list, text, active, onClick) {
  const li = document.createElement("li");
  if (active) li.className = "active";
  const button = document.createElement("button");
  button.className = "link";
  button.type = "button";
  button.textContent = text;
  button.addEventListener("click", onClick);
  li.appendChild(button);
  list.appendChild(li);
}

async function loadWork() {
  const work = await api("GET", "/v1/work");
  $("work").textContent = `queued in this process: ${work.pending}` +
    (work.last_error ? ` · last error: ${work.last_error}` : "");
}

async function loadUserWork() {
  const work = await api("GET", `/v1/users/${enc(state.user)}/work`);
  $("user-work").textContent = `indexing: ${work.pending} pending · ${work.done} done · ${work.failed} failed`;
  const list = $("failed");
  list.replaceChildren();
  for (const row of work.rows) {
    const li = document.createElement("li");
    li.textContent = `${messageLine(row.message)} — ${row.error} (${row.attempts} attempts)`;
    list.appendChild(li);
  }
  $("retry").hidden = work.failed === 0;
}

function messageLine(m) {
  const text = typeof m.content === "string" ? m.content : JSON.stringify(m.content);
  return `${m.name || m.role}: ${text ?? ""}`;
}

async function loadUsers() {
  let data;
  try {
    data = await api("GET", "/v1/users?limit=1000");
  } catch (error) {
    showWelcome(error.message.startsWith("AuthenticationError") ? "key" : null);
    throw error;
  }
  const list = $("users");
  list.replaceChildren();
  for (const user of data.users) linkItem(list, user, user === state.user, () => openUser(user));
  showWelcome(data.users.length ? "pick" : "empty");
}

// What to do first, while no user is open: give a key, pick a user, or add a memory.
function showWelcome(step) {
  $("welcome").hidden = state.user !== null;
  for (const name of ["key", "pick", "empty"]) $("welcome-" + name).hidden = name !== step;
  const origin = window.location.origin;
  const auth = state.key ? ` \\\n  -H "Authorization: Bearer $TIERMEM_API_KEY"` : "";
  $("welcome-curl").textContent = `curl -X POST ${origin}/v1/messages${auth} \\\n` +
    `  -H "Content-Type: application/json" \\\n` +
    `  -d '{"user_id": "ana", "session_id": "s1", "messages": [{"role": "user", "content": "I adopted a greyhound named Pixel."}]}'`;
  const key = state.key ? `, os.environ["TIERMEM_API_KEY"]` : "";
  $("welcome-python").textContent = (state.key ? "import os\n" : "") +
    `from tiermem.client import MemoryClient\n\n` +
    `with MemoryClient("${origin}"${key}) as client:\n` +
    `    client.add("user", "I adopted a greyhound named Pixel.", "ana", "s1")`;
}

async function openUser(user) {
  if (!user) return;
  state.user = user;
  state.session = undefined;
  $("welcome").hidden = true;
  $("user-view").hidden = false;
  $("user-name").textContent = user;
  $("transcript").replaceChildren();
  $("transcript-session").textContent = "";
  clearContext();
  clearSynopsis();
  await Promise.all([loadUsers(), loadStats(), loadSessions(), listMemories(), loadUserWork()]);
}

async function loadStats() {
  const s = await api("GET", `/v1/users/${enc(state.user)}/stats`);
  const types = Object.entries(s.by_type).map(([t, n]) => `${t} ${n}`).join(", ");
  $("stats").textContent = `${s.count} memories (${types || "none"}) · accesses ${s.total_access_count}` +
    (s.newest ? ` · newest ${s.newest.slice(0, 19)}` : "");
}

async function loadSessions() {
  const data = await api("GET", `/v1/users/${enc(state.user)}/sessions`);
  const list = $("sessions");
  list.replaceChildren();
  for (const s of data.sessions) {
    const label = `${s.session_id ?? "(no session)"} · ${s.messages} messages`;
    linkItem(list, label, s.session_id === state.session, () => openSession(s.session_id));
  }
}

async function openSession(session) {
  state.session = session;
  await loadSessions();
  const query = session === null ? "" : `?session_id=${enc(session)}`;
  const data = await api("GET", `/v1/users/${enc(state.user)}/messages${query}`);
  $("transcript-session").textContent = session ?? "(no session)";
  const list = $("transcript");
  list.replaceChildren();
  for (const m of data.messages) {
    const li = document.createElement("li");
    li.textContent = messageLine(m);
    li.title = m.timestamp;
    list.appendChild(li);
  }
}

function showMemories(rows) {
  const body = $("memories").querySelector("tbody");
  body.replaceChildren();
  for (const { memory, score, evidence } of rows) {
    const row = document.createElement("tr");
    row.dataset.id = memory.id;
    cell(row, score === null ? "" : score.toFixed(3));
    cell(row, fixed(evidence?.similarity, 3));
    cell(row, evidence?.keyword_rank ? "#" + evidence.keyword_rank : "");
    if (evidence) row.title = `rrf ${evidence.rrf.toFixed(4)}` +
      (evidence.vector_rank ? ` · vector #${evidence.vector_rank}` : "") +
      (evidence.keyword_rank ? ` · keyword #${evidence.keyword_rank} (text rank ${evidence.keyword_score.toFixed(3)})` : "");
    cell(row, memory.memory_type);
    cell(row, memory.content);
    cell(row, memory.created_at.slice(0, 19));
    const button = document.createElement("button");
    button.className = "danger";
    button.textContent = "Delete";
    button.addEventListener("click", () => deleteMemory(memory));
    row.appendChild(document.createElement("td")).appendChild(button);
    body.appendChild(row);
  }
}

async function listMemories() {
  const data = await api("GET", `/v1/memories?user_id=${enc(state.user)}&limit=200`);
  showMemories(data.memories.map((memory) => ({ memory, score: null, evidence: null })));
}

async function searchMemories(query) {
  if (!query.trim()) return listMemories();
  const data = await api("POST", "/v1/search", { user_id: state.user, query, k: 50 });
  showMemories(data.results);
}

async function deleteMemory(memory) {
  if (!confirm(`Delete this memory of ${state.user}?\n\n${memory.content}`)) return;
  await api("DELETE", `/v1/memories/${enc(memory.id)}?user_id=${enc(state.user)}`);
  await Promise.all([searchMemories($("search-input").value), loadStats()]);
}

async function deleteUser() {
  if (!confirm(`Erase everything of user ${state.user}? This cannot be undone.`)) return;
  await api("DELETE", `/v1/users/${enc(state.user)}`);
  state.user = null;
  $("user-view").hidden = true;
  await loadUsers();
}

function fixed(value, digits) {
  return value === null || value === undefined ? "" : value.toFixed(digits);
}

function clearContext() {
  $("context-total").textContent = "";
  $("context-items").querySelector("tbody").replaceChildren();
  $("context-messages").textContent = "";
  showError("", $("context-error"));
}

async function assembleContext() {
  clearContext(); // a failed request never leaves the previous answer on screen
  const body = { user_id: state.user, query: $("context-query").value };
  const budget = $("context-budget").value;
  if (budget !== "") body.max_tokens = Number(budget);
  const session = $("context-session").value;
  if (session) body.session_id = session;
  const context = await api("POST", "/v1/context", body, $("context-error"));
  $("context-total").textContent = `${context.total_tokens} of ${context.max_tokens} tokens, ${context.items.length} items`;
  const rows = $("context-items").querySelector("tbody");
  for (const item of context.items) {
    const row = document.createElement("tr");
    cell(row, item.section);
    cell(row, item.source);
    cell(row, item.score.toFixed(3));
    cell(row, fixed(item.similarity, 3));
    cell(row, fixed(item.keywords, 2));
    cell(row, String(item.tokens));
    cell(row, item.content);
    rows.appendChild(row);
  }
  $("context-messages").textContent = JSON.stringify(context.messages, null, 2);
}

function clearSynopsis() {
  $("synopsis").hidden = true;
  for (const id of ["synopsis-identity", "synopsis-context", "synopsis-generated"]) $(id).textContent = "";
  showError("", $("synopsis-error"));
}

async function loadSynopsis() {
  clearSynopsis();
  const s = await api("GET", `/v1/users/${enc(state.user)}/synopsis`, undefined, $("synopsis-error"));
  $("synopsis-identity").textContent = s.identity || "(nothing yet)";
  $("synopsis-context").textContent = s.context || "(nothing yet)";
  $("synopsis-generated").textContent = `${s.generated_at.slice(0, 19)} · ${s.source}`;
  $("synopsis").hidden = false;
}

function on(id, event, handler) {
  $(id).addEventListener(event, (e) => {
    e.preventDefault();
    handler().catch(() => {}); // api() already shows the error
  });
}

on("key-form", "submit", async () => {
  state.key = $("api-key").value.trim();
  sessionStorage.setItem("tiermem-key", state.key);
  await Promise.all([loadUsers(), loadWork()]);
});
on("user-form", "submit", () => openUser($("user-input").value.trim()));
on("search-form", "submit", () => searchMemories($("search-input").value));
on("list-all", "click", () => { $("search-input").value = ""; return listMemories(); });
on("context-form", "submit", assembleContext);
on("delete-user", "click", deleteUser);
on("refresh-users", "click", loadUsers);
on("load-synopsis", "click", loadSynopsis);
on("retry", "click", async () => {
  await api("POST", `/v1/users/${enc(state.user)}/work/retry`);
  await loadUserWork();
});

$("api-key").value = state.key;
Promise.all([loadUsers(), loadWork()]).catch(() => {});
setInterval(() => loadWork().catch(() => {}), 5000);
