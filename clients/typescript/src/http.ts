/**
 * One request to the server over `fetch`: JSON in and out, the server's typed errors
 * thrown again, and retries with backoff where nothing can have been done twice by
 * mistake: a 503 (the server refused: store down, shutting down) and a connection that
 * failed or was reset. A 4xx is never retried: the same request would be refused again.
 */
import { typeName } from "./checks.js";
import {
  InvalidTypeError,
  StoreUnavailableError,
  TiermemError,
  errorFromBody,
  type ErrorBody,
} from "./errors.js";
import { hasDotSegment, rawFetch } from "./rawpath.js";

export interface TransportOptions {
  /** A tenant's key (`tiermem keys create`); none in development mode. */
  apiKey?: string;
  /** Milliseconds per attempt (default 30000). */
  timeoutMs?: number;
  /** Attempts after the first on a 503 or a failed connection (default 2). */
  maxRetries?: number;
  /** Base wait before a retry, doubled at each (default 200 ms, with jitter). */
  backoffMs?: number;
  /** Longest wait before a retry, the server's Retry-After included (default 5000 ms). */
  maxBackoffMs?: number;
  /** The fetch to use (default: the global one). */
  fetch?: typeof fetch;
}

/** One request: method, path, query parameters (null ones left out) and a body. */
export interface Request {
  method: "GET" | "POST" | "PATCH" | "DELETE";
  path: string;
  params?: Record<string, unknown>;
  json?: unknown;
  ndjson?: string;
  /** Error statuses whose body is the answer (`/readyz`'s 503 says what is down). */
  accept?: number[];
  /** Milliseconds the server may take on purpose (a flush's wait), beyond the timeout. */
  waitMs?: number;
}

export class Transport {
  readonly url: string;
  private readonly headers: Record<string, string>;
  private readonly timeoutMs: number;
  private readonly maxRetries: number;
  private readonly backoffMs: number;
  private readonly maxBackoffMs: number;
  private readonly fetch: typeof fetch;

  constructor(url: string, options: TransportOptions = {}) {
    this.url = url.replace(/\/+$/, "");
    this.headers = options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {};
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.maxRetries = options.maxRetries ?? 2;
    this.backoffMs = options.backoffMs ?? 200;
    this.maxBackoffMs = options.maxBackoffMs ?? 5_000;
    this.fetch = options.fetch ?? globalThis.fetch;
  }

  /** The JSON answer of `request`, or the server's typed error thrown. */
  async json<T>(request: Request): Promise<T> {
    const response = await this.send(request);
    if (response.ok || request.accept?.includes(response.status)) {
      return (await response.json()) as T;
    }
    throw await errorOf(response);
  }

  /** The response of `request` (a status under 400), retried on a 503 or a failed
   * connection; the typed error of any other failure. */
  async send(request: Request): Promise<Response> {
    const url = this.url + request.path + query(request.params);
    const send = hasDotSegment(request.path) ? rawFetch : this.fetch;
    const init: RequestInit = { method: request.method, headers: { ...this.headers } };
    if (request.ndjson !== undefined) {
      init.body = request.ndjson;
      (init.headers as Record<string, string>)["content-type"] = "application/x-ndjson";
    } else if (request.json !== undefined) {
      init.body = JSON.stringify(request.json);
      (init.headers as Record<string, string>)["content-type"] = "application/json";
    }
    for (let attempt = 0; ; attempt++) {
      let response: Response;
      try {
        response = await send(url, { ...init, signal: AbortSignal.timeout(this.timeoutMs + (request.waitMs ?? 0)) });
      } catch (exc) {
        const timedOut = (exc as Error).name === "TimeoutError";
        if (timedOut || attempt >= this.maxRetries) throw this.unreachable(exc);
        await sleep(this.wait(attempt, null));
        continue;
      }
      if (response.status !== 503 || attempt >= this.maxRetries || request.accept?.includes(503)) {
        return response;
      }
      await response.body?.cancel();
      await sleep(this.wait(attempt, retryAfter(response)));
    }
  }

  private wait(attempt: number, retryAfterSeconds: number | null): number {
    const backoff = this.backoffMs * 2 ** attempt * (0.5 + Math.random() / 2);
    return Math.min(retryAfterSeconds === null ? backoff : retryAfterSeconds * 1000, this.maxBackoffMs);
  }

  private unreachable(exc: unknown): StoreUnavailableError {
    const error = exc as Error & { cause?: { code?: string; message?: string } };
    const why = error.name === "TimeoutError"
      ? `no answer within ${this.timeoutMs} ms`
      : `${error.cause?.code ?? (error as { code?: string }).code ?? error.name}: ${error.cause?.message ?? error.message}`;
    return new StoreUnavailableError(`cannot reach the tiermem server at ${this.url}: ${why}`);
  }
}

/** The typed error of an answer with an error status. */
export async function errorOf(response: Response): Promise<TiermemError> {
  const text = await response.text();
  let body: unknown = null;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: a proxy's page, say
  }
  const after = retryAfter(response);
  if (typeof body === "object" && body !== null && "error" in body) {
    return errorFromBody(body as ErrorBody, after);
  }
  if ([502, 503, 504].includes(response.status)) {
    return new StoreUnavailableError(`the server answered ${response.status}`, after);
  }
  return new TiermemError(`the server answered ${response.status}: ${text.slice(0, 200)}`);
}

/** Seconds the server asked a client to wait (`Retry-After`: seconds or an HTTP date). */
function retryAfter(response: Response): number | null {
  const value = response.headers.get("retry-after");
  if (!value) return null;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(seconds, 0);
  const when = Date.parse(value);
  return Number.isNaN(when) ? null : Math.max((when - Date.now()) / 1000, 0);
}

/** `?a=1&b=x&b=y` of the parameters given (null and undefined left out). */
function query(params: Record<string, unknown> | undefined): string {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params ?? {})) {
    if (value === null || value === undefined) continue;
    for (const item of Array.isArray(value) ? value : [value]) search.append(key, String(item));
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A path segment, percent-encoded: an id may hold `/`, `?` or spaces, and a segment of
 * dots (`.`, `..`) is encoded so no URL parser removes it. */
export function segment(value: unknown, field: string): string {
  if (typeof value !== "string") {
    throw new InvalidTypeError(field, `must be a str, got ${typeName(value)}`);
  }
  return encodeURIComponent(value).replace(/\./g, "%2E");
}
