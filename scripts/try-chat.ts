#!/usr/bin/env bun
/**
 * A first chat on a fresh clone, with nothing to download: writes a folder with a tiny GGUF
 * and a config whose llama-server is scripts/fake-llama-server (the test stand-in, a TEST TOOL
 * that echoes), then runs one chat through the compiled core and the typed client, streaming
 * the reply. `--llama-server PATH` and `--model FILE` use a real llama-server and model instead.
 *   npm run try-chat                                  # says "Hello"
 *   npm run try-chat -- "What is a GGUF?"
 *   npm run try-chat -- --llama-server /path/to/llama-server --model /path/to/model.gguf "Hi"
 * The folder (default dist/try-chat/) stays: `./dist/local-ai serve-stdio --config
 * dist/try-chat/config.yaml` talks to the same setup by hand.
 */
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { LocalAiClient } from "../src/client/index.ts";
import { writeFakeModel } from "../test/fixtures/llama-stand-in/binary.ts";

const ROOT = resolve(import.meta.dir, "..");
export const FAKE_LLAMA_SERVER = join(ROOT, "scripts/fake-llama-server");

export interface TryChatSetup {
  dir: string;
  config: string;
  llamaServer: string;
  model: string;
}

/** Writes `dir`/config.yaml (and a tiny model unless one is given); returns what it used. */
export function writeTryChat(dir: string, opts: { llamaServer?: string; model?: string } = {}): TryChatSetup {
  mkdirSync(join(dir, "models"), { recursive: true });
  const llamaServer = resolve(opts.llamaServer ?? FAKE_LLAMA_SERVER);
  // The same kind of tiny GGUF the tests write: real header, no weights worth running.
  const model = opts.model ? resolve(opts.model) : writeFakeModel(join(dir, "models"), "tiny.gguf");
  const config = join(dir, "config.yaml");
  writeFileSync(
    config,
    [
      "# Written by scripts/try-chat.ts (npm run try-chat).",
      ...(llamaServer === FAKE_LLAMA_SERVER
        ? ['# llama.binary is the test stand-in, not llama.cpp: it answers "You said: ...".']
        : []),
      "llama:",
      `  binary: ${JSON.stringify(llamaServer)}`,
      "model:",
      `  path: ${JSON.stringify(model)}`,
      "app:",
      "  data_dir: ./data",
      "",
    ].join("\n"),
  );
  return { dir, config, llamaServer, model };
}

function option(argv: string[], name: string): string | undefined {
  const i = argv.indexOf(name);
  if (i < 0) return undefined;
  const value = argv[i + 1];
  argv.splice(i, 2);
  if (!value) throw new Error(`${name} needs a value`);
  return value;
}

async function main(argv: string[]): Promise<number> {
  const args = [...argv];
  const dir = resolve(option(args, "--dir") ?? join(ROOT, "dist/try-chat"));
  const setup = writeTryChat(dir, {
    llamaServer: option(args, "--llama-server"),
    model: option(args, "--model"),
  });
  const input = args.join(" ") || "Hello";
  const binary = join(ROOT, "dist", process.platform === "win32" ? "local-ai.exe" : "local-ai");
  if (!existsSync(binary)) {
    console.error("building the core first (npm run build:host)…");
    const built = Bun.spawnSync([process.execPath, join(ROOT, "build.ts"), "--single"], {
      stderr: "inherit",
    });
    if (built.exitCode !== 0) return 1;
  }
  const show = (p: string) => relative(process.cwd(), p) || ".";
  console.error(
    `config ${show(setup.config)}: llama-server ${show(setup.llamaServer)}, model ${show(setup.model)}`,
  );

  const client = await LocalAiClient.start({ binary, config: setup.config, cwd: dir });
  try {
    process.stdout.write(`> ${input}\n`);
    const chat = client.chat({ input, session_id: "try-chat" });
    for await (const event of chat) if (event.event === "llm_chunk") process.stdout.write(event.delta);
    const result = await chat.result;
    process.stdout.write("\n");
    for (const w of result.warnings) console.error(`warning ${w.code}: ${w.message}`);
    console.error(
      `By hand: ./dist/local-ai serve-stdio --config ${show(setup.config)}, then type\n` +
        `  {"id":1,"method":"chat","params":{"input":"Hello"}}`,
    );
    return 0;
  } catch (err) {
    console.error(`try-chat: ${(err as Error).message}`);
    return 1;
  } finally {
    await client.close();
  }
}

if (import.meta.main) process.exit(await main(process.argv.slice(2)));
