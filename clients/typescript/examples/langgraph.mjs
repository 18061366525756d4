// LangGraph.js long-term memory kept by tiermem: a graph (or any code given a store)
// writes and reads through LangGraph's BaseStore API, and every item is a tiermem memory
// of the user, found by tiermem's search and offered in its contexts.
//
//   TIERMEM_URL=http://127.0.0.1:8765 node langgraph.mjs
import { MemoryClient } from "tiermem";
import { TiermemStore } from "./tiermem-store.mjs";

const memory = new MemoryClient(process.env.TIERMEM_URL ?? "http://127.0.0.1:8765");
const store = new TiermemStore(memory); // graph.compile({ store }) takes it as it is
const user = process.env.CHAT_USER ?? "leo";

await store.put([user, "preference"], "drink", { text: "Leo drinks his coffee black" });
await store.put([user, "preference"], "music", { text: "Leo plays the cello on Sundays" });
await store.put([user, "trips"], "2025", { text: "Leo hiked in the Dolomites", days: 6 });

const item = await store.get([user, "preference"], "drink");
console.log(`get: ${item.value.text}`);
const [hit] = await store.search([user], { query: "which instrument does he play", limit: 1 });
console.log(`search: ${hit.value.text} (score ${hit.score.toFixed(2)})`);
const long = await store.search([user, "trips"], { filter: { days: { $gte: 5 } } });
console.log(`filter: ${long.map((i) => i.key).join(", ")}`);
console.log(`namespaces: ${JSON.stringify(await store.listNamespaces({ prefix: [user] }))}`);

await memory.flush(30);
const context = await memory.getContext("what should I know about Leo's weekends?", user);
console.log(`context holds the cello: ${context.messages.some((m) => String(m.content).includes("cello"))}`);

await store.delete([user, "preference"], "drink");
console.log(`after delete: ${await store.get([user, "preference"], "drink")}`);
