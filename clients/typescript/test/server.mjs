// The tiermem server a test file talks to: $TIERMEM_URL (the pytest driver starts one
// `tiermem serve` per engine and passes it), else a `tiermem serve` on SQLite started
// here ($PYTHON -m tiermem.cli, default python3) and stopped when the tests end.
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after } from "node:test";

/** A free loopback port. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.on("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

/** The base URL of a running tiermem server. */
export async function serverUrl() {
  if (process.env.TIERMEM_URL) return process.env.TIERMEM_URL;
  const folder = mkdtempSync(join(tmpdir(), "tiermem-ts-"));
  const config = join(folder, "tiermem.yaml");
  writeFileSync(config, "memory:\n  buffer: {size: 8, summary_batch: 4}\n  facts: {enabled: true}\n");
  const port = await freePort();
  const python = process.env.PYTHON ?? "python3";
  const args = ["-m", "tiermem.cli", "serve", "--port", String(port), "--config", config, "--db", join(folder, "memory.db")];
  const server = spawn(python, args, { stdio: ["ignore", "ignore", "inherit"], env: { HF_HUB_OFFLINE: "1", ...process.env } });
  after(() => server.kill());
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (server.exitCode !== null) throw new Error(`tiermem serve ended with ${server.exitCode}`);
    try {
      if ((await fetch(`${url}/healthz`)).ok) return url;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error("tiermem serve did not answer /healthz in 120 s");
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** A user id no other test uses: a slash, a space and non-ASCII on purpose. */
export function newUser() {
  return `user/${crypto.randomUUID().slice(0, 8)} é`;
}
