import { mkdirSync, readdirSync, readFileSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { pickFreePort } from "../../src/runtime/ports.ts";
import type { StreamTiming } from "../overhead/stream-timing.ts";

/** One streamed chat's timing and llama-server's own counters for it. */
export interface SseChat extends StreamTiming {
  /** `timings.prompt_n` (tokens processed) and `timings.cache_n` (taken from the cache). */
  promptN?: number;
  cacheN?: number;
  /** The reply's text, to carry a conversation on. */
  text: string;
}

/**
 * One streamed `/v1/chat/completions` (content deltas timed from the request's start), greedy,
 * a fresh connection each (llama-server drops idle keep-alive ones). `model` names the router's.
 */
export async function sseChat(
  baseUrl: string,
  body: { model?: string; messages: unknown[]; max_tokens: number },
  apiKey?: string,
): Promise<SseChat> {
  const sent = performance.now();
  const res = await fetch(`${baseUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { "Content-Type": "application/json", ...(apiKey ? { Authorization: `Bearer ${apiKey}` } : {}) },
    body: JSON.stringify({ ...body, temperature: 0, stream: true, stream_options: { include_usage: true } }),
    keepalive: false,
  });
  if (!res.ok || !res.body) throw new Error(`llama-server answered ${res.status}: ${await res.text()}`);
  const out: SseChat = { sent, first: 0, last: 0, pieces: 0, text: "" };
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const bytes of res.body) {
    const now = performance.now();
    buffer += decoder.decode(bytes, { stream: true });
    let end = buffer.indexOf("\n\n");
    while (end !== -1) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      end = buffer.indexOf("\n\n");
      if (!event.startsWith("data: ") || event === "data: [DONE]") continue;
      const chunk = JSON.parse(event.slice(6)) as {
        choices?: { delta?: { content?: string | null } }[];
        timings?: { prompt_ms?: number; prompt_n?: number; cache_n?: number };
        error?: unknown;
      };
      if (chunk.error) throw new Error(`llama-server mid-stream: ${JSON.stringify(chunk.error)}`);
      if (chunk.timings) {
        out.promptMs = chunk.timings.prompt_ms;
        out.promptN = chunk.timings.prompt_n;
        out.cacheN = chunk.timings.cache_n;
      }
      const content = chunk.choices?.[0]?.delta?.content;
      if (typeof content !== "string" || content === "") continue;
      if (out.pieces === 0) out.first = now;
      out.last = now;
      out.pieces++;
      out.text += content;
    }
  }
  // A reply of only special tokens streams no content: its end is its first token.
  if (out.pieces === 0) out.first = out.last = performance.now();
  return out;
}

/**
 * llama-server's router (b10587: no `-m`, `--models-dir DIR --models-max N`; transcripts/97):
 * the given GGUFs linked into a folder under the names the router serves them by, `args`
 * passed on to every child it spawns.
 */
export class Router {
  private constructor(
    private readonly proc: Subprocess,
    readonly baseUrl: string,
  ) {}

  static async start(
    binary: string,
    work: string,
    models: Record<string, string>,
    maxModels: number,
    args: string[],
  ): Promise<Router> {
    const dir = join(work, `router-models-${maxModels}`);
    mkdirSync(dir, { recursive: true });
    for (const [name, path] of Object.entries(models)) {
      try {
        symlinkSync(path, join(dir, `${name}.gguf`));
      } catch {
        // Linked by an earlier router of this run.
      }
    }
    const port = await pickFreePort();
    const proc = Bun.spawn(
      [
        binary,
        "--models-dir",
        dir,
        "--models-max",
        String(maxModels),
        "--host",
        "127.0.0.1",
        "--port",
        String(port),
        ...args,
      ],
      { stdout: "ignore", stderr: "ignore" },
    );
    const baseUrl = `http://127.0.0.1:${port}`;
    for (let i = 0; ; i++) {
      const ok = await fetch(`${baseUrl}/health`).then(
        async (r) => {
          await r.arrayBuffer();
          return r.ok;
        },
        () => false,
      );
      if (ok) break;
      if (proc.exitCode !== null || i > 3000)
        throw new Error(`the router did not come up (${proc.exitCode})`);
      await Bun.sleep(10);
    }
    return new Router(proc, baseUrl);
  }

  chat(model: string, messages: unknown[], maxTokens: number): Promise<SseChat> {
    return sseChat(this.baseUrl, { model, messages, max_tokens: maxTokens });
  }

  /** The loaded models and the port of each one's child (from `/models`' status args). */
  async loaded(): Promise<{ name: string; port: number }[]> {
    const body = (await (await fetch(`${this.baseUrl}/models`)).json()) as {
      data: { id: string; status: { value: string; args?: string[] } }[];
    };
    return body.data
      .filter((m) => m.status.value === "loaded")
      .map((m) => {
        const args = m.status.args ?? [];
        return { name: m.id, port: Number(args[args.indexOf("--port") + 1]) };
      });
  }

  async unload(model: string): Promise<void> {
    await fetch(`${this.baseUrl}/models/unload`, { method: "POST", body: JSON.stringify({ model }) }).then(
      (r) => r.arrayBuffer(),
    );
  }

  /** The model servers it spawned. */
  children(): number[] {
    return childrenOf(this.proc.pid);
  }

  async stop(): Promise<void> {
    this.proc.kill();
    await this.proc.exited;
  }
}

/** Resident memory of a process in bytes (VmRSS; 0 when it is gone). */
export function rssBytes(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/** The children of `pid` spawned by any of its threads (the router spawns from a thread of its own). */
export function childrenOf(pid: number): number[] {
  try {
    return readdirSync(`/proc/${pid}/task`).flatMap((tid) => {
      try {
        return readFileSync(`/proc/${pid}/task/${tid}/children`, "utf8")
          .split(" ")
          .filter(Boolean)
          .map(Number);
      } catch {
        return [];
      }
    });
  } catch {
    return [];
  }
}
