#!/usr/bin/env bun
/**
 * The bare relay (issue 31): the least a core must do per streamed piece, as a baseline for the
 * core's CPU per piece. It speaks the bench's subset of the protocol on stdin/stdout
 * (`{id, method: "chat", params: {input}}`, `shutdown`) and for a chat `fetch`es llama-server's
 * SSE stream, splits the events, parses each one's JSON and writes one NDJSON line per piece,
 * flushed once per network read. No watchdog, no checks, no history, no store.
 *
 *   bun bench/overhead/relay.ts BASE_URL API_KEY SYSTEM MAX_TOKENS [content|reasoning_content]
 */

export {};

const [baseUrl, apiKey, system, maxTokens, piece = "content"] = process.argv.slice(2);
const event = piece === "content" ? "llm_chunk" : "llm_reasoning";
const out = Bun.stdout.writer();

async function chat(id: unknown, input: string): Promise<void> {
  const res = await fetch(`${baseUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${apiKey}` },
    body: JSON.stringify({
      messages: [
        { role: "system", content: system },
        { role: "user", content: input },
      ],
      max_tokens: Number(maxTokens),
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    }),
  });
  if (!res.body) throw new Error(`llama-server answered ${res.status} without a body`);
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const bytes of res.body) {
    buffer += decoder.decode(bytes, { stream: true });
    let end = buffer.indexOf("\n\n");
    while (end !== -1) {
      const data = buffer.slice(6, end); // "data: "
      buffer = buffer.slice(end + 2);
      end = buffer.indexOf("\n\n");
      if (data === "[DONE]") continue;
      const delta = JSON.parse(data).choices?.[0]?.delta?.[piece];
      if (typeof delta === "string" && delta !== "")
        out.write(`${JSON.stringify({ step: 0, delta, id, type: "event", event })}\n`);
    }
    out.flush();
  }
  out.write(`${JSON.stringify({ id, type: "result", result: {} })}\n`);
  out.flush();
}

const decoder = new TextDecoder();
let buffer = "";
for await (const bytes of Bun.stdin.stream()) {
  buffer += decoder.decode(bytes, { stream: true });
  let nl = buffer.indexOf("\n");
  while (nl !== -1) {
    const msg = JSON.parse(buffer.slice(0, nl)) as {
      id: unknown;
      method: string;
      params?: { input?: string };
    };
    buffer = buffer.slice(nl + 1);
    nl = buffer.indexOf("\n");
    if (msg.method === "shutdown") {
      out.write(`${JSON.stringify({ id: msg.id, type: "result", result: {} })}\n`);
      await out.flush();
      process.exit(0);
    }
    if (msg.method === "chat") await chat(msg.id, msg.params?.input ?? "");
    else {
      // initialize, warmup: nothing to do, answered so a driver may send them as to the core.
      out.write(`${JSON.stringify({ id: msg.id, type: "result", result: {} })}\n`);
      out.flush();
    }
  }
}
