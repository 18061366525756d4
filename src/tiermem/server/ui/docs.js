// The API reference, offline: /openapi.json rendered as HTML by this file alone (no CDN,
// no build step). Every text is set with textContent, never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const METHODS = ["get", "post", "put", "patch", "delete"];

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  if (className) node.className = className;
  return node;
}

function resolve(spec, schema) {
  if (schema && schema.$ref) return resolve(spec, schema.$ref.split("/").slice(1).reduce((o, k) => o[k], spec));
  return schema || {};
}

function typeName(spec, schema) {
  if (!schema) return "";
  if (schema.$ref) return schema.$ref.split("/").pop();
  for (const key of ["anyOf", "oneOf"]) {
    if (schema[key]) return schema[key].map((s) => typeName(spec, s)).join(" | ");
  }
  if (schema.enum) return schema.enum.map((v) => JSON.stringify(v)).join(" | ");
  if (schema.type === "array") return `${typeName(spec, schema.items)}[]`;
  return schema.type || "any";
}

function fieldTable(spec, rows) {
  const table = el("table");
  const head = table.createTHead().insertRow();
  for (const name of ["name", "in", "type", "required", "description"]) head.appendChild(el("th", name));
  const body = table.createTBody();
  for (const row of rows) {
    const tr = body.insertRow();
    for (const text of row) tr.appendChild(el("td", text));
  }
  return table;
}

function bodyRows(spec, content) {
  const schema = resolve(spec, content?.["application/json"]?.schema);
  const required = new Set(schema.required || []);
  return Object.entries(schema.properties || {}).map(([name, prop]) => [
    name, "body", typeName(spec, prop), required.has(name) ? "yes" : "", prop.description || "",
  ]);
}

function renderOperation(spec, path, method, op) {
  const id = `${method}-${path}`.replace(/[^a-zA-Z0-9]+/g, "-");
  const block = el("article", undefined, "route");
  block.id = id;
  const title = el("h3");
  title.appendChild(el("span", method.toUpperCase(), `method ${method}`));
  title.appendChild(el("code", ` ${path}`));
  block.appendChild(title);
  if (op.summary) block.appendChild(el("p", op.summary, "summary"));
  if (op.description) block.appendChild(el("p", op.description));
  const rows = (op.parameters || []).map((p) => [
    p.name, p.in, typeName(spec, p.schema), p.required ? "yes" : "", p.description || "",
  ]).concat(bodyRows(spec, op.requestBody?.content));
  if (rows.length) block.appendChild(fieldTable(spec, rows));
  const answers = el("ul", undefined, "responses");
  for (const [code, answer] of Object.entries(op.responses || {})) {
    answers.appendChild(el("li", `${code}: ${answer.description || ""}`));
  }
  block.appendChild(answers);
  const link = el("a", `${method.toUpperCase()} ${path}`);
  link.href = `#${id}`;
  const item = el("li");
  item.appendChild(link);
  $("toc").appendChild(item);
  return block;
}

async function main() {
  const answer = await fetch("/openapi.json");
  if (!answer.ok) throw new Error(`/openapi.json answered ${answer.status}`);
  const spec = await answer.json();
  document.title = `${spec.info.title} API ${spec.info.version}`;
  $("api-title").textContent = `${spec.info.title} API`;
  $("api-version").textContent = `version ${spec.info.version} · OpenAPI ${spec.openapi}`;
  $("api-description").textContent = spec.info.description || "";
  const routes = $("routes");
  for (const [path, item] of Object.entries(spec.paths)) {
    for (const method of METHODS) {
      if (item[method]) routes.appendChild(renderOperation(spec, path, method, item[method]));
    }
  }
}

main().catch((error) => {
  $("error").textContent = String(error);
  $("error").hidden = false;
});
