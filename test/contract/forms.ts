import { afterEach } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { scanGguf } from "../../src/plan/gguf-scan.ts";
import { pickFreePort } from "../../src/runtime/ports.ts";
import { bertModel } from "../fixtures/gguf-bert.ts";
import { encodeGguf, writeGguf } from "../fixtures/gguf-writer.ts";
import { writeFakeLlamaServer, writeFakeModel } from "../fixtures/llama-stand-in/binary.ts";
import {
  embeddingContext,
  embeddingFlagsOf,
  embeddingServer,
} from "../fixtures/llama-stand-in/embeddings.ts";
import { LlamaStandIn } from "../fixtures/llama-stand-in/in-process.ts";
import type { Turn } from "../fixtures/llama-stand-in/script.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { waitFor } from "../fixtures/wait.ts";

/** A running stand-in, whichever form serves it. */
export interface RunningStandIn {
  baseUrl: string;
  apiKey: string;
  /** Streams the stand-in saw the client close before they finished. */
  cancelled(): number;
  /** Ends the "model loading" phase (the subprocess ends it on its own timer). */
  finishLoading(): void;
  /** Its log so far (the subprocess's stderr; what the in-process form would print). */
  log(): string;
  /** The subprocess's exit, once it has one. */
  exit(): { code: number | null; signal: NodeJS.Signals | null } | undefined;
  stop(): Promise<void>;
}

export interface StartOptions {
  script?: Turn[];
  nCtx?: number;
  slots?: number;
  /** Start in the "loading the model" phase (503 everywhere). */
  loading?: boolean;
  /** No API key, as the recordings were made (every route open). */
  open?: boolean;
  /** `--sleep-idle-seconds` (transcripts 85, 86); absent: never sleeps. */
  sleepIdleS?: number;
  /** How long loading (and a wake's reload) takes, ms. */
  loadMs?: number;
  /** The chat template's text (`--chat-template-file`), as chatml_think.jinja for thinking (91). */
  chatTemplate?: string;
  /** `--cache-ram` in MiB (94, 94b); absent: llama-server's default. */
  cacheRamMib?: number;
  /** `--slot-save-path` (93); absent: slot actions are 501 (93e). */
  slotDir?: string;
  /**
   * An embedding server (110–119): these llama-server flags (`--embeddings`, `--reranking`,
   * `--pooling none`, `-ub 1024 -c 1024`…) on a BERT model shaped as tiny-embed.gguf, or on
   * the llama model with `decoder` (96, 116).
   */
  embedding?: { flags: string[]; decoder?: boolean };
  /**
   * A vision server (100–109): `--mmproj` with images of a fixed 64 tokens (tiny-vision-mmproj),
   * or `{patch: 16}` for tokens by size (the pixtral one, 109).
   */
  vision?: { patch?: number };
}

export interface Form {
  name: "in-process" | "subprocess";
  start(options?: StartOptions): Promise<RunningStandIn>;
}

const API_KEY = "contract-key";

/** The embedding server `main.ts` would make of these flags and model. */
function inProcessEmbedding(options: StartOptions) {
  if (!options.embedding) return {};
  const flags = embeddingFlagsOf(options.embedding.flags);
  const header = encodeGguf(bertModel()).header;
  const metadata = options.embedding.decoder
    ? { "general.architecture": "llama", "llama.context_length": 4096, "llama.embedding_length": 64 }
    : scanGguf((at, n) => header.subarray(at, at + n)).metadata;
  const embedding = embeddingServer(flags, metadata, flags.ctx ?? 4096);
  return embedding ? { embedding, nCtx: embeddingContext(embedding, flags.ctx) } : {};
}

const inProcess: Form = {
  name: "in-process",
  async start(options = {}) {
    const standIn = new LlamaStandIn({
      apiKey: API_KEY,
      apiKeys: options.open ? [] : [API_KEY],
      nCtx: options.nCtx ?? 2048,
      slots: options.slots ?? 4,
      // As the subprocess: an unscripted request gets the echo.
      unscripted: "echo",
      sleepIdleMs: options.sleepIdleS === undefined ? undefined : options.sleepIdleS * 1000,
      wakeMs: options.loadMs ?? 0,
      chatTemplate: options.chatTemplate,
      ...(options.cacheRamMib !== undefined ? { cacheRamMib: options.cacheRamMib } : {}),
      ...(options.slotDir !== undefined ? { slotSavePath: `${options.slotDir}/` } : {}),
      ...inProcessEmbedding(options),
      ...(options.vision
        ? { vision: options.vision.patch ? { patch: options.vision.patch } : { tokensPerImage: 64 } }
        : {}),
    });
    standIn.script(...(options.script ?? []));
    if (options.loading) standIn.model.loaded = false;
    return {
      baseUrl: standIn.baseUrl,
      apiKey: API_KEY,
      cancelled: () => standIn.disconnects,
      finishLoading: () => {
        standIn.model.loaded = true;
      },
      log: () => standIn.log.join("\n"),
      exit: () => undefined,
      stop: async () => standIn.stop(),
    };
  },
};

/** The subprocess on llama-server's own flags, the key in LLAMA_API_KEY as the supervisor passes it. */
const subprocess: Form = {
  name: "subprocess",
  async start(options = {}) {
    const dir = tmpdir("local-ai-stand-in-");
    const binary = writeFakeLlamaServer(dir.path);
    const embed = options.embedding;
    const model =
      embed && !embed.decoder ? writeGguf(dir.path, "embed.gguf", bertModel()) : writeFakeModel(dir.path);
    const scriptFile = join(dir.path, "script.json");
    writeFileSync(scriptFile, JSON.stringify(options.script ?? []));
    const port = await pickFreePort();
    const args = ["-m", model, "-np", String(options.slots ?? 4)];
    // An embedding server takes its context from the model unless its flags say (111).
    args.push(...(embed ? embed.flags : ["-c", String(options.nCtx ?? 2048)]));
    if (options.sleepIdleS !== undefined) args.push("--sleep-idle-seconds", String(options.sleepIdleS));
    if (options.chatTemplate !== undefined) {
      const file = join(dir.path, "template.jinja");
      writeFileSync(file, options.chatTemplate);
      args.push("--jinja", "--chat-template-file", file);
    }
    if (options.cacheRamMib !== undefined) args.push("--cache-ram", String(options.cacheRamMib));
    if (options.slotDir !== undefined) args.push("--slot-save-path", options.slotDir);
    if (options.vision) args.push("--mmproj", join(dir.path, "mmproj.gguf"));
    const proc = Bun.spawn([binary, ...args, "--port", String(port)], {
      env: {
        PATH: process.env.PATH ?? "",
        ...(options.open ? {} : { LLAMA_API_KEY: API_KEY }),
        FAKE_LLAMA_SCRIPT: scriptFile,
        FAKE_LLAMA_CHUNK_DELAY_MS: "0",
        FAKE_LLAMA_LOAD_MS: String(options.loadMs ?? (options.loading ? 400 : 0)),
        ...(options.vision?.patch ? { FAKE_LLAMA_IMAGE_PATCH: String(options.vision.patch) } : {}),
      },
      stdout: "ignore",
      stderr: "pipe",
    });
    let stderr = "";
    const decoder = new TextDecoder();
    void (async () => {
      for await (const chunk of proc.stderr) stderr += decoder.decode(chunk, { stream: true });
    })();
    // The port is bound before "loading" (transcript 01) and the model ready at "listening on".
    const ready = options.loading ? "load_model: loading model" : "listening on";
    if (!(await waitFor(() => stderr.includes(ready) || proc.exitCode !== null)) || proc.exitCode !== null)
      throw new Error(`the stand-in did not start:\n${stderr}`);
    return {
      baseUrl: `http://127.0.0.1:${port}`,
      apiKey: API_KEY,
      cancelled: () => stderr.split("stop: cancel task").length - 1,
      finishLoading: () => {},
      log: () => stderr,
      exit: () =>
        proc.exitCode === null && proc.signalCode === null
          ? undefined
          : { code: proc.exitCode, signal: proc.signalCode as NodeJS.Signals | null },
      stop: async () => {
        if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGKILL");
        await proc.exited;
        dir[Symbol.dispose]();
      },
    };
  },
};

export const FORMS: Form[] = process.platform === "win32" ? [inProcess] : [inProcess, subprocess];

/**
 * Stand-ins per test in `form`: `start` one (or several), `call` it with its key; every one a test
 * started is stopped after it (inside a describe): a subprocess left running outlives the suite.
 */
export function perTest(form: Form) {
  const running: RunningStandIn[] = [];
  afterEach(async () => {
    await Promise.all(running.splice(0).map((s) => s.stop()));
  });
  return {
    start: async (options: StartOptions = {}) => {
      const started = await form.start(options);
      running.push(started);
      return started;
    },
    call: (s: RunningStandIn, path: string, init: RequestInit = {}) =>
      fetch(`${s.baseUrl}${path}`, {
        ...init,
        headers: { Authorization: `Bearer ${s.apiKey}`, ...(init.headers as Record<string, string>) },
      }),
  };
}
