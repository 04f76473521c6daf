import type { Subprocess } from "bun";
import { childEnv, randomApiKey } from "../../src/runtime/child-env.ts";
import { pickFreePort } from "../../src/runtime/ports.ts";
import { sseChat } from "./sse-chat.ts";
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
    return sseChat(this.baseUrl, { messages, max_tokens: maxTokens }, this.apiKey, piece);
  }

  get pid(): number {
    return this.proc.pid;
  }

  async stop(): Promise<void> {
    this.proc.kill();
    await this.proc.exited;
  }
}
