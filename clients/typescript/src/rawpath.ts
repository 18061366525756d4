/**
 * A request whose path holds a segment of dots: `fetch` parses its URL as the WHATWG
 * standard says, and that removes a `.` or `..` segment even percent-encoded (`%2E%2E`),
 * so the user `..` would become another path. Node's own `http` sends the path as written.
 */

/** Whether fetch's URL parser would remove a segment of `path`. */
export function hasDotSegment(path: string): boolean {
  return path
    .split("?", 1)[0]
    .split("/")
    .some((part) => /^(\.|%2e){1,2}$/i.test(part));
}

/** `fetch(url, init)` with the path sent as written, through node:http or node:https. */
export async function rawFetch(url: string, init: RequestInit): Promise<Response> {
  const origin = new URL(url);
  const path = url.slice(origin.origin.length);
  const http = origin.protocol === "https:" ? await import("node:https") : await import("node:http");
  const body = typeof init.body === "string" ? init.body : undefined;
  return new Promise((resolve, reject) => {
    const request = http.request(
      {
        host: origin.hostname,
        port: origin.port,
        path,
        method: init.method,
        headers: init.headers as Record<string, string>,
        signal: init.signal ?? undefined,
      },
      (answer) => {
        const chunks: Buffer[] = [];
        answer.on("data", (chunk: Buffer) => chunks.push(chunk));
        answer.on("error", reject);
        answer.on("end", () => {
          const headers = new Headers();
          for (const [key, value] of Object.entries(answer.headers)) {
            if (value !== undefined) headers.set(key, Array.isArray(value) ? value.join(", ") : value);
          }
          const status = answer.statusCode ?? 500;
          resolve(new Response(Buffer.concat(chunks), { status, headers }));
        });
      },
    );
    request.on("error", reject);
    request.end(body);
  });
}
