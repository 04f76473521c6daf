import type { Subprocess } from "bun";
import { childEnv, randomApiKey } from "../../src/runtime/child-env.ts";
import { pickFreePort } from "../../src/runtime/ports.ts";
import type { StreamTiming } from "./stream-timing.ts";

/** How often the direct side polls /health while llama-server loads. */
const POLL_MS = 2;

/**
 * llama-server started directly with the plan's argv, the way a host without local-ai would:
 * the same binary, flags, environment (the core's allowlist) and API key, polled for readiness
 * every POLL_MS, and asked over plain fetch + SSE.
 */
export class DirectServer {
  private constructor(
    private readonly proc: Subprocess,
    readonly baseUrl: string,
    readonly apiKey: string,
    /** Spawn → first /health 200, ms. */
    readonly readyMs: number,
  ) {}

  static async start(binary: string, argv: string[]): Promise<DirectServer> {
    const port = await pickFreePort();
    const apiKey = randomApiKey();
    const t0 = performance.now();
    const proc = Bun.spawn([binary, ...argv, "--host", "127.0.0.1", "--port", String(port)], {
      env: childEnv(process.env, apiKey) as Record<string, string>,
      stdout: "ignore",
      stderr: "ignore",
    });
    const baseUrl = `http://127.0.0.1:${port}`;
    for (;;) {
      const status = await fetch(`${baseUrl}/health`).then(
        async (r) => {
          await r.arrayBuffer();
          return r.status;
        },
        () => null,
      );
      if (status === 200) break;
      if (proc.exitCode !== null) throw new Error(`llama-server exited ${proc.exitCode} while loading`);
      await Bun.sleep(POLL_MS);
    }
    return new DirectServer(proc, baseUrl, apiKey, performance.now() - t0);
  }

  /**
   * One streamed chat completion, timed from the request's start to each content delta (or,
   * for a thinking template, each reasoning delta: `piece`).
   */
  async chat(
    messages: unknown[],
    maxTokens: number,
    piece: "content" | "reasoning_content" = "content",
  ): Promise<StreamTiming> {
    const sent = performance.now();
    const res = await fetch(`${this.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: `Bearer ${this.apiKey}` },
      body: JSON.stringify({
        messages,
        max_tokens: maxTokens,
        // Greedy on both sides (the core's agent says the same): equal replies, equal lengths.
        temperature: 0,
        stream: true,
        stream_options: { include_usage: true },
      }),
      // A fresh connection per request, as the core opens one: llama-server drops idle
      // keep-alive connections after 5 s, and a reused dead one fails with ECONNRESET.
      keepalive: false,
    });
    if (!res.ok || !res.body) throw new Error(`llama-server answered ${res.status}: ${await res.text()}`);
    const timing: StreamTiming = { sent, first: 0, last: 0, pieces: 0 };
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
          choices?: { delta?: { content?: string | null; reasoning_content?: string | null } }[];
          timings?: { prompt_ms?: number };
        };
        if (typeof chunk.timings?.prompt_ms === "number") timing.promptMs = chunk.timings.prompt_ms;
        const content = chunk.choices?.[0]?.delta?.[piece];
        if (typeof content !== "string" || content === "") continue;
        if (timing.pieces === 0) timing.first = now;
        timing.last = now;
        timing.pieces++;
      }
    }
    return timing;
  }

  get pid(): number {
    return this.proc.pid;
  }

  async stop(): Promise<void> {
    this.proc.kill();
    await this.proc.exited;
  }
}
