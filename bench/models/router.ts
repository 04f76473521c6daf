import { mkdirSync, readdirSync, readFileSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { pickFreePort } from "../../src/runtime/ports.ts";
import { type SseChat, sseChat } from "../overhead/sse-chat.ts";

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
