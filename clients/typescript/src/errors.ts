/**
 * The typed errors of tiermem, as in Python's `tiermem.errors`: the server names the
 * class of every error it answers (`{error, field, message, fix}`), and the client throws
 * the class of the same name, with the same `field` and `hint`.
 */

/** Base class of every error tiermem throws on purpose. */
export class TiermemError extends Error {
  /** The argument or key that was wrong (`"role"`, `"messages[1].content"`); null when
   * the error is not about one. */
  readonly field: string | null;
  /** What was wrong with it (the message without the field and the hint). */
  readonly problem: string;
  /** What to do instead ("" when there is nothing to add). */
  readonly hint: string;

  constructor(problem: string, field: string | null = null, hint = "") {
    super(field === null ? problem : `${field}: ${problem}${hint ? ` (${hint})` : ""}`);
    this.name = new.target.name;
    this.field = field;
    this.problem = problem;
    this.hint = hint;
  }
}

/** A value given to an operation is not acceptable; `field` names it. */
export class InputError extends TiermemError {
  constructor(field: string, problem: string, hint = "") {
    super(problem, field, hint);
  }
}

/** A value has the wrong type (metadata that is a string, content that is a number). */
export class InvalidTypeError extends InputError {}
/** A message role outside user, assistant, system, tool, agent_call, agent_response. */
export class InvalidRoleError extends InputError {}
/** A size, window or budget that is zero, negative or otherwise out of range. */
export class InvalidSizeError extends InputError {}
/** JSON data that is malformed, truncated or of an unknown shape. */
export class SerializationError extends InputError {}
/** Content larger than the server's maximum (`memory.max_message_chars`). */
export class ContentTooLargeError extends InputError {}
/** An operation that must be scoped to a user was called without `userId`. */
export class MissingUserError extends InputError {}
/** A vector whose dimension differs from the index it is meant for. */
export class DimensionMismatchError extends InputError {}
/** An id prefix that matches several memories: give more of the id. */
export class AmbiguousIdError extends InputError {}
/** A configuration key with a missing, unknown or out-of-range value. */
export class ConfigError extends InputError {}
/** A PostgreSQL store opened with another `memory.persistent.partitions` than its tables'. */
export class PartitionsMismatchError extends ConfigError {}
/** A feature of the server needs an optional extra that is not installed there. */
export class MissingExtraError extends ConfigError {}

/** A memory, message or user that does not exist (or belongs to another user). */
export class NotFoundError extends TiermemError {}
/** No message of the user has this id. */
export class MessageNotFoundError extends NotFoundError {}

/** An LLM or embedding provider of the server failed. */
export class ProviderError extends TiermemError {}
/** The provider cannot serve now (unreachable, too slow, rate limited, failing). */
export class ProviderUnavailableError extends ProviderError {}
/** The provider did not answer within its timeout. */
export class ProviderTimeoutError extends ProviderUnavailableError {}
/** The provider answered 429 and its retries were exhausted. */
export class RateLimitError extends ProviderUnavailableError {}
/** The server refused the API key (unknown, revoked or missing), or a provider refused
 * the server's own key. */
export class AuthenticationError extends ProviderError {}
/** The provider answered with an error status or a body that cannot be read. */
export class ProviderResponseError extends ProviderError {}
/** The provider answered a server error and its retries were exhausted. */
export class ProviderServerError extends ProviderUnavailableError {}
/** The model answered, but not in the shape asked for. */
export class MalformedAnswerError extends ProviderResponseError {}
/** A local model of the server could not be loaded. */
export class ModelLoadError extends TiermemError {}
/** A call after `close()`. */
export class ClosedError extends TiermemError {}
/** A store operation failed; its transaction was rolled back. */
export class StoreError extends TiermemError {}

/** The server or its database cannot be reached, or answered 503: retry later.
 * `retryAfter` is the server's `Retry-After` in seconds (null when it sent none). */
export class StoreUnavailableError extends StoreError {
  readonly retryAfter: number | null;

  constructor(problem: string, retryAfter: number | null = null) {
    super(problem);
    this.retryAfter = retryAfter;
  }
}

/** The server's PostgreSQL lacks the `vector` extension (pgvector). */
export class MissingExtensionError extends StoreUnavailableError {}
/** The synopsis or shared cache backend of the server failed. */
export class CacheError extends TiermemError {}

type InputClass = new (field: string, problem: string, hint?: string) => InputError;
type PlainClass = new (problem: string) => TiermemError;

const INPUT_ERRORS: Record<string, InputClass> = {
  InputError,
  InvalidTypeError,
  InvalidRoleError,
  InvalidSizeError,
  SerializationError,
  ContentTooLargeError,
  MissingUserError,
  DimensionMismatchError,
  AmbiguousIdError,
  ConfigError,
  PartitionsMismatchError,
  MissingExtraError,
};

const OTHER_ERRORS: Record<string, PlainClass> = {
  TiermemError,
  NotFoundError,
  MessageNotFoundError,
  ProviderError,
  ProviderUnavailableError,
  ProviderTimeoutError,
  RateLimitError,
  AuthenticationError,
  ProviderResponseError,
  ProviderServerError,
  MalformedAnswerError,
  ModelLoadError,
  ClosedError,
  StoreError,
  StoreUnavailableError,
  MissingExtensionError,
  CacheError,
};

/** The names of every error class, as the server sends them in `error`. */
export const ERROR_NAMES: readonly string[] = [
  ...Object.keys(INPUT_ERRORS),
  ...Object.keys(OTHER_ERRORS),
];

/** An error answer of the server (`{error, field, message, fix}`). */
export interface ErrorBody {
  error: string;
  field?: string | null;
  message?: string;
  fix?: string;
}

/** The typed error an error body describes (`TiermemError` for a name this client does
 * not know); `retryAfter` is the answer's `Retry-After` in seconds. */
export function errorFromBody(body: ErrorBody, retryAfter: number | null = null): TiermemError {
  const message = String(body.message ?? "");
  const input = Object.hasOwn(INPUT_ERRORS, body.error) ? INPUT_ERRORS[body.error] : undefined;
  if (input) return new input(String(body.field ?? ""), message, String(body.fix ?? ""));
  if (body.error === "StoreUnavailableError" || body.error === "MissingExtensionError") {
    const unavailable = OTHER_ERRORS[body.error] as typeof StoreUnavailableError;
    return new unavailable(message, retryAfter);
  }
  const other = Object.hasOwn(OTHER_ERRORS, body.error) ? OTHER_ERRORS[body.error] : undefined;
  return other ? new other(message) : new TiermemError(`${body.error}: ${message}`);
}
