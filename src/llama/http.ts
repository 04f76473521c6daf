import { readCapped } from "../util/capped-body.ts";
import { ConnectionRefused, LlmError, MAX_ERROR_BODY_BYTES, notJson, responseError } from "./errors.ts";

/**
 * The request edge: every call to llama-server goes through `call`, which adds the key, the
 * deadline and the mapping of "nothing answered" to an LlmError. Nothing else in the core
 * calls fetch on llama-server; the streamed completion alone reads its answer over a socket of
 * its own (stream-socket.ts), with the same key and the same errors.
 */

/** Where a llama-server listens, and the per-launch key it takes (`Authorization: Bearer`). */
export interface LlamaEndpoint {
  /** e.g. http://127.0.0.1:40123 */
  baseUrl: string;
  apiKey: string;
}

export interface CallOptions {
  /** A JSON body: the call is a POST with it. */
  body?: string;
  /** The caller's: when it aborts, its reason is thrown as it is. */
  signal?: AbortSignal;
  /** How long the whole answer may take; past it, `connection_lost`. */
  timeoutMs?: number;
}

/** A server to ask: without `apiKey`, as a stranger would (`/health` is public; the key check). */
export type Target = Pick<LlamaEndpoint, "baseUrl"> & Partial<Pick<LlamaEndpoint, "apiKey">>;

/**
 * One request. Resolves with the answer whatever its status (the caller reads it); rejects
 * with the signal's reason when `signal` aborts, else with `connection_lost` when nothing
 * answered in time. The request is on its way when this returns (fetch is called before the
 * first await), so a caller may do other work before awaiting it.
 */
export async function call(server: Target, path: string, o: CallOptions = {}): Promise<Response> {
  const timeout = o.timeoutMs === undefined ? undefined : AbortSignal.timeout(o.timeoutMs);
  const signal = timeout && o.signal ? AbortSignal.any([o.signal, timeout]) : (timeout ?? o.signal);
  // Never a kept-alive connection: llama-server's HTTP library looks at an idle one every 10 ms,
  // and its stop waits for that look, so one left open delays its exit (and a swap) by up to
  // 10 ms (docs/performance.md "The swap, fourth pass"). A loopback connect per call is ~0.1 ms.
  const headers: Record<string, string> = { Connection: "close" };
  if (o.body !== undefined) headers["Content-Type"] = "application/json";
  if (server.apiKey !== undefined) headers.Authorization = `Bearer ${server.apiKey}`;
  try {
    return await fetch(`${server.baseUrl}${path}`, {
      method: o.body !== undefined ? "POST" : "GET",
      headers,
      body: o.body,
      signal,
      keepalive: false,
    });
  } catch (err) {
    if (o.signal?.aborted) throw o.signal.reason;
    if (timeout?.aborted)
      throw new LlmError("connection_lost", `llama-server did not answer ${path} within ${o.timeoutMs} ms`);
    const why = `could not reach llama-server: ${(err as Error).message}`;
    if ((err as NodeJS.ErrnoException).code === "ECONNREFUSED") throw new ConnectionRefused(why);
    throw new LlmError("connection_lost", why);
  }
}

/**
 * A call's status alone (its body read to MAX_ERROR_BODY_BYTES and dropped: one that never ends
 * would fill memory before the deadline fires), or null when nothing answered.
 */
export async function statusOf(server: Target, path: string, o: CallOptions = {}): Promise<number | null> {
  try {
    const res = await call(server, path, o);
    await readCapped(res, MAX_ERROR_BODY_BYTES);
    return res.status;
  } catch {
    return null;
  }
}

/** A call whose answer must be 2xx JSON: the parsed body, else the mapped LlmError. */
export async function callJson(server: Target, path: string, o: CallOptions = {}): Promise<unknown> {
  const res = await call(server, path, o);
  if (!res.ok) throw await responseError(res);
  const text = await answerText(res, path, o.signal);
  try {
    return JSON.parse(text);
  } catch {
    throw notJson(`an answer to ${path}`, text);
  }
}

/**
 * The most of a 2xx answer read whole before it is parsed. llama-server's largest are an
 * embeddings batch (base64, bounded by what one answer to the host carries: protocol/embed.ts,
 * a few MiB to some tens) and /props with its chat template (kilobytes); one that never ends (a
 * broken server, another program on the port) would fill memory at loopback speed before any
 * deadline fired. An object, so a test can lower it.
 */
export const ANSWER_BYTES = { most: 64 * 1024 * 1024 };

/**
 * An answer's body as text; `connection_lost` when it is cut off (the signal's reason when it
 * aborted), `bad_response` past ANSWER_BYTES (the rest never read).
 */
export async function answerText(res: Response, path: string, signal?: AbortSignal): Promise<string> {
  let read: { bytes: Uint8Array; over: boolean };
  try {
    read = await readCapped(res, ANSWER_BYTES.most);
  } catch (err) {
    if (signal?.aborted) throw signal.reason;
    throw new LlmError(
      "connection_lost",
      `llama-server's answer to ${path} was cut off: ${(err as Error).message}`,
    );
  }
  if (read.over)
    throw new LlmError("bad_response", `llama-server's answer to ${path} is over ${ANSWER_BYTES.most} bytes`);
  return new TextDecoder().decode(read.bytes);
}
