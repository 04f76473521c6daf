import { readFileSync } from "node:fs";
import { join } from "node:path";

/** One `curl -i` case of test/fixtures/llama-server/transcripts: the request made and the response. */
export interface Transcript {
  file: string;
  method: string;
  path: string;
  /** `?action=save`, or "" when none. */
  query: string;
  contentType: string | undefined;
  /** The request body as sent (a file of bodies/ or an inline -d), "" when none. */
  requestBody: string;
  bodyFile: string | undefined;
  status: number;
  /** Response headers, names in lower case. */
  headers: Record<string, string>;
  body: string;
}

/** Reads a transcript whose first line is its curl command (the single-request ones). */
export function readTranscript(dir: string, file: string): Transcript {
  return parseExchange(dir, file, readFileSync(join(dir, "transcripts", file), "utf8").split("\n"));
}

/**
 * Every exchange of a transcript that holds several (76, 93, 93b…): one per `$ curl` line,
 * each ending where the recorder's next comment or command begins.
 */
export function readExchanges(dir: string, file: string): Transcript[] {
  const lines = readFileSync(join(dir, "transcripts", file), "utf8").split("\n");
  const starts = lines.flatMap((l, i) => (l.startsWith("$ curl") ? [i] : []));
  return starts.map((at, k) => parseExchange(dir, file, lines.slice(at, starts[k + 1] ?? lines.length)));
}

/** One exchange: its first line the curl command, then the response as curl -i printed it. */
function parseExchange(dir: string, file: string, lines: string[]): Transcript {
  const command = shellWords((lines[0] as string).replace(/^\$ /, ""));
  let method: string | undefined;
  let contentType: string | undefined;
  let data: string | undefined;
  let url = "";
  for (let i = 1; i < command.length; i++) {
    const word = command[i] as string;
    if (word === "-X") method = command[++i];
    else if (word === "-H") {
      const [name, ...value] = (command[++i] as string).split(":");
      if (name?.toLowerCase() === "content-type") contentType = value.join(":").trim();
    } else if (word === "-d") data = command[++i];
    else if (word.startsWith("http")) url = word;
  }
  const bodyFile = data?.startsWith("@") ? data.slice(1) : undefined;
  const requestBody = bodyFile ? readFileSync(join(dir, bodyFile), "utf8") : (data ?? "");

  const statusAt = lines.findIndex((l) => l.startsWith("HTTP/1.1 "));
  const status = Number((lines[statusAt] as string).split(" ")[1]);
  const headers: Record<string, string> = {};
  // The status line and headers end in \r\n as sent; the body is as it came.
  let i = statusAt + 1;
  for (; i < lines.length && lines[i] !== "\r" && lines[i] !== ""; i++) {
    const line = (lines[i] as string).replace(/\r$/, "");
    const colon = line.indexOf(":");
    headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
  }
  const found = lines.findIndex((l, at) => at > i && (l.startsWith("# ") || l.startsWith("$ ")));
  // Without a line after it (the 9x files), the file's own last newline goes too.
  const end = found === -1 ? lines.length - (lines.at(-1) === "" ? 1 : 0) : found;
  // The recorder put a newline of its own between the body and the line after it.
  const body = lines.slice(i + 1, end).join("\n");
  return {
    file,
    method: method ?? (data !== undefined ? "POST" : "GET"),
    path: new URL(url).pathname,
    query: new URL(url).search,
    contentType,
    requestBody,
    bodyFile,
    status,
    headers,
    body,
  };
}

/** Splits a recorded command line as the shell did: spaces separate words unless escaped. */
function shellWords(line: string): string[] {
  const words: string[] = [];
  let word = "";
  for (let i = 0; i < line.length; i++) {
    const c = line[i] as string;
    if (c === "\\" && i + 1 < line.length) word += line[++i];
    else if (c === " ") {
      if (word) words.push(word);
      word = "";
    } else word += c;
  }
  if (word) words.push(word);
  return words;
}

/**
 * The events of an SSE body, checking the framing llama-server uses: every event exactly
 * `data: <payload>\n\n`, nothing else on the wire. Throws naming the first stray bytes.
 */
export function sseEvents(body: string): string[] {
  const events: string[] = [];
  let at = 0;
  while (at < body.length) {
    const end = body.indexOf("\n\n", at);
    const event = end === -1 ? body.slice(at) : body.slice(at, end);
    if (end === -1 || !event.startsWith("data: ") || event.includes("\n"))
      throw new Error(
        `not an SSE event of the recorded framing at byte ${at}: ${JSON.stringify(event.slice(0, 80))}`,
      );
    events.push(event.slice("data: ".length));
    at = end + 2;
  }
  return events;
}

/** What a chunk is, by what it carries (transcripts 11–16). */
export type ChunkKind =
  | "role"
  | "reasoning"
  | "content"
  | "tool_call"
  | "tool_call_more"
  | "finish"
  | "usage"
  | "done";

export function chunkKind(data: string): ChunkKind {
  if (data === "[DONE]") return "done";
  const chunk = JSON.parse(data) as {
    choices: { finish_reason: string | null; delta: Record<string, unknown> }[];
  };
  const choice = chunk.choices[0];
  if (!choice) return "usage";
  if (choice.finish_reason !== null) return "finish";
  if ("role" in choice.delta) return "role";
  const calls = choice.delta.tool_calls as { id?: string }[] | undefined;
  if (calls) return calls[0]?.id !== undefined ? "tool_call" : "tool_call_more";
  // A thinking template's deltas (91, 91d).
  if ("reasoning_content" in choice.delta) return "reasoning";
  return "content";
}

/**
 * The shape of a JSON value: objects as their sorted keys with each value's shape, arrays as
 * the shapes they hold (duplicates once), leaves as their type. Two bodies of the same shape
 * carry the same fields, whatever the values or the key order.
 */
export function shape(value: unknown): unknown {
  if (Array.isArray(value)) {
    const seen = new Map<string, unknown>();
    for (const item of value) {
      const s = shape(item);
      seen.set(JSON.stringify(s), s);
    }
    return [...seen.values()];
  }
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(value).sort()) out[key] = shape((value as Record<string, unknown>)[key]);
    return out;
  }
  return value === null ? "null" : typeof value;
}
