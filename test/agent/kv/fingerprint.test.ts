import { describe, expect, spyOn, test } from "bun:test";
import * as fs from "node:fs";
import { copyFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { stat } from "node:fs/promises";
import { join } from "node:path";
import { fingerprint, launchFingerprint, launchFingerprinter } from "../../../src/agent/kv/fingerprint.ts";
import { ConfigSchema } from "../../../src/config/schema.ts";
import { parseProps } from "../../../src/llama/props.ts";
import { filesUnchanged } from "../../../src/runtime/launch.ts";
import { DriveAnswers } from "../../../src/util/drive-answers.ts";
import { fileIdentity } from "../../../src/util/file-identity.ts";
import { logger } from "../../../src/util/logger.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// What a saved slot is valid for (docs/agent.md#prompt-reuse). A slot holds the embeddings its
// projector made of each image, and llama-server matches a restored image to the next prompt's
// by the image's bytes alone: restored under another projector (same model, same type and
// shape, other weights), the real server (b10587) answered the next turn from the old
// projector's embeddings, the image counted as cached (cached_tokens covering its 64 tokens).

const llama = ConfigSchema.parse({}).llama;
const launched = (projector: string | null, extraArgs: string[] | null = null) => ({ projector, extraArgs });

function setup(dir: string) {
  const model = join(dir, "model.gguf");
  const a = join(dir, "mmproj-a.gguf");
  const b = join(dir, "mmproj-b.gguf");
  writeFileSync(model, "model");
  writeFileSync(a, "projector a");
  writeFileSync(b, "projector b");
  const props = parseProps({
    model_path: model,
    default_generation_settings: { n_ctx: 2048 },
    build_info: "b10587-3f545becc",
  });
  return { props, a, b };
}

describe("launchFingerprint", () => {
  test("another projector, or the same one replaced in place, is another fingerprint", async () => {
    await using dir = tmpdir();
    const { props, a, b } = setup(dir.path);
    const withA = launchFingerprint(props, llama, launched(a));
    expect(withA).toBeDefined();
    expect(launchFingerprint(props, llama, launched(a))).toBe(withA);
    expect(launchFingerprint(props, llama, launched(b))).not.toBe(withA);
    expect(launchFingerprint(props, llama, launched(null))).not.toBe(withA);
    // A new file at the same path (a projector updated where it was): another inode.
    rmSync(a);
    copyFileSync(b, a);
    expect(launchFingerprint(props, llama, launched(a))).not.toBe(withA);
  });

  test("without a projector the fingerprint is what it was; one that cannot be read gives none", async () => {
    await using dir = tmpdir();
    const { props } = setup(dir.path);
    expect(launchFingerprint(props, llama, launched(null))).toBe(launchFingerprint(props, llama));
    expect(launchFingerprint(props, llama, launched(join(dir.path, "gone.gguf")))).toBeUndefined();
  });

  test("a models entry's own extra_args count as llama.extra_args do", async () => {
    // Seen with the real server: an entry's --rope-freq-base changed between two cores, and the
    // session's slot, computed under the old one, was restored (llama.extra_args' change was not).
    await using dir = tmpdir();
    const { props } = setup(dir.path);
    const plain = launchFingerprint(props, llama, launched(null, []));
    expect(launchFingerprint(props, llama, launched(null, ["--rope-freq-base", "20000"]))).not.toBe(plain);
    // Planned with none, or not planned here (the config's): what it was.
    expect(plain).toBe(launchFingerprint(props, llama));
  });

  test("a key or token rotated in extra_args keeps the fingerprint, and no hash of it is kept", async () => {
    // Hashed as given, a rotated --api-key or --hf-token (which changes no cache) dropped every
    // saved slot, and each sidecar on disk held a hash of the secret.
    await using dir = tmpdir();
    const { props } = setup(dir.path);
    const withKey = (key: string) =>
      launchFingerprint(props, llama, launched(null, ["--api-key", key, `--hf-token=${key}t`]));
    expect(withKey("old-secret")).toBe(withKey("new-secret"));
    // A flag that changes the cache still counts.
    const plain = launchFingerprint(props, llama, launched(null, ["--api-key", "k"]));
    expect(launchFingerprint(props, llama, launched(null, ["--api-key", "k", "-c", "4096"]))).not.toBe(plain);
    // A config without secrets keeps the fingerprint it had (its saved slots).
    expect(launchFingerprint(props, llama, launched(null, ["--rope-freq-base", "20000"]))).toBe(
      fingerprint({
        model: fileIdentity(props.model_path as string)!,
        contextPerSlot: 2048,
        cacheTypeK: llama.cache_type_k,
        cacheTypeV: llama.cache_type_v,
        flashAttn: llama.flash_attn,
        chatTemplateHash: props.chat_template_hash,
        build: props.build_info,
        extraArgs: ["--rope-freq-base", "20000"],
      }),
    );
  });

  test("threads, the HTTP server and the log keep the fingerprint; what shapes the cache changes it", async () => {
    // Hashed whole, `--threads 4` (or a port, a log flag) added to extra_args dropped every
    // session's saved slot: each prompt was processed again, though none of them changes a state.
    await using dir = tmpdir();
    const { props } = setup(dir.path);
    const of = (...args: string[]) => launchFingerprint(props, llama, launched(null, args));
    const plain = of();
    for (const args of [
      ["--threads", "4"],
      ["-t", "4", "-tb", "8", "--cpu-range=0-3", "--prio", "2", "--poll", "0"],
      ["--port", "9000", "--threads-http", "2", "--timeout", "30", "--metrics", "--no-slots"],
      ["--log-file", "/tmp/x.log", "-lv", "4", "--log-timestamps", "--no-webui", "--api-key", "k"],
    ])
      expect(of(...args)).toBe(plain);
    // Kept out, a flag leaves the ones after it counting.
    expect(of("--threads", "4", "--rope-freq-base", "20000")).toBe(of("--rope-freq-base", "20000"));
    // A state saved under one flash-attn setting, context, KV type or adapter is never restored under another.
    for (const args of [
      ["-fa", "on"],
      ["-c", "4096"],
      ["-ctk", "q8_0"],
      ["--lora", "a.gguf"],
      ["-ub", "64"],
    ]) {
      expect(of(...args)).not.toBe(plain);
      expect(of("--threads", "4", ...args)).toBe(of(...args));
    }
  });

  test("a LoRA or control vector replaced in place is another fingerprint", async () => {
    // The adapter's weights change every cached K and V, as the model's do: one retrained and
    // written over the old file (same path, same flags) restored slots computed with the old one.
    await using dir = tmpdir();
    const { props } = setup(dir.path);
    const lora = join(dir.path, "adapter.gguf");
    const vector = join(dir.path, "vector.gguf");
    writeFileSync(lora, "adapter v1");
    writeFileSync(vector, "vector v1");
    const of = (...args: string[]) => launchFingerprint(props, llama, launched(null, args));
    for (const [args, file] of [
      [["--lora", lora], lora],
      [[`--lora=${vector},${lora}`], lora],
      [["--lora-scaled", `${lora}:0.5`], lora],
      [["--control-vector", vector], vector],
      [["--control_vector_scaled", `${vector}:0.8`], vector],
    ] as const) {
      const before = of(...args);
      expect(before).toBeDefined();
      writeFileSync(`${file}.new`, "retrained, same size");
      renameSync(`${file}.new`, file);
      expect(of(...args)).not.toBe(before);
    }
    // One that cannot be read: nothing is saved or restored (llama-server would not start with it).
    expect(of("--lora", join(dir.path, "gone.gguf"))).toBeUndefined();
  });

  test("an adapter replaced after the start: the fingerprint stays the start's, and the files differ", async () => {
    // A server that re-reads it (waking from an idle sleep) computes with the new weights: states
    // saved under the start's fingerprint must not be restored into it, nor new ones saved.
    await using dir = tmpdir();
    const { props } = setup(dir.path);
    const lora = join(dir.path, "adapter.gguf");
    writeFileSync(lora, "adapter v1");
    const args = launched(null, ["--lora", lora]);
    const files = {
      model: fileIdentity(props.model_path as string),
      projector: undefined,
      adapters: [fileIdentity(lora)],
    };
    const atStart = launchFingerprint(props, llama, { ...args, files });
    expect(atStart).toBe(launchFingerprint(props, llama, args));
    expect(filesUnchanged(files)).toBe(true);
    writeFileSync(`${lora}.new`, "adapter v2");
    renameSync(`${lora}.new`, lora);
    expect(launchFingerprint(props, llama, { ...args, files })).toBe(atStart);
    expect(filesUnchanged(files)).toBe(false);
  });

  test("a launch's model is the file it was started with, and a file replaced since is seen", async () => {
    await using dir = tmpdir();
    const { props } = setup(dir.path);
    const model = props.model_path as string;
    const files = { model: fileIdentity(model), projector: undefined };
    const atStart = launchFingerprint(props, llama, { ...launched(null), files });
    expect(atStart).toBe(launchFingerprint(props, llama));
    expect(filesUnchanged(files)).toBe(true);
    // A pull puts the new file in place by a rename: another inode, the old one still open.
    writeFileSync(`${model}.new`, "model");
    renameSync(`${model}.new`, model);
    // What the server computes with is still the file it read: the fingerprint stays that file's.
    expect(launchFingerprint(props, llama, { ...launched(null), files })).toBe(atStart);
    expect(launchFingerprint(props, llama)).not.toBe(atStart);
    expect(filesUnchanged(files)).toBe(false);
    expect(filesUnchanged(null)).toBe(true);
  });

  test("a model extra_args load instead of the planned one (-m) is the file the fingerprint follows", async () => {
    await using dir = tmpdir();
    const { props: planned } = setup(dir.path);
    const other = join(dir.path, "other.gguf");
    writeFileSync(other, "other weights");
    // llama-server reports the file it loaded; the launcher read the planned one before the spawn.
    const props = { ...planned, model_path: other };
    const args = launched(null, ["-m", other]);
    const start = () => ({ model: fileIdentity(planned.model_path as string), projector: undefined });
    const before = launchFingerprint(props, llama, { ...args, files: start() });
    // The loaded file updated in place, then a new start: its old states must not be restored.
    writeFileSync(`${other}.new`, "other weights, updated");
    renameSync(`${other}.new`, other);
    expect(launchFingerprint(props, llama, { ...args, files: start() })).not.toBe(before);
  });
});

// A save or restore turned off by an adapter retrained in place was logged as "the model file
// changed": a host developer looking at the model found it untouched, and the adapter unsaid.
test("the log names the adapter, not the model, when an adapter changed since the start", async () => {
  const { spyOn } = await import("bun:test");
  const { logger } = await import("../../../src/util/logger.ts");
  const { launchFingerprinter } = await import("../../../src/agent/kv/fingerprint.ts");
  await using dir = tmpdir();
  const { props } = setup(dir.path);
  const lora = join(dir.path, "adapter.gguf");
  writeFileSync(lora, "adapter v1");
  const files = {
    model: fileIdentity(props.model_path as string),
    projector: undefined,
    adapters: [fileIdentity(lora)],
  };
  const launch = { ...launched(null, ["--lora", lora]), files, props: async () => props };
  writeFileSync(`${lora}.new`, "adapter v2");
  renameSync(`${lora}.new`, lora);
  const warn = spyOn(logger, "warn").mockImplementation(() => {});
  try {
    const fingerprintOf = launchFingerprinter(
      launch as unknown as Parameters<typeof launchFingerprinter>[0],
      llama,
    );
    expect(await fingerprintOf()).toBeUndefined();
    expect(warn.mock.calls.map((c) => String(c[0]))).toEqual([
      expect.stringContaining("a LoRA adapter or control vector file changed since llama-server loaded it"),
    ]);
  } finally {
    warn.mockRestore();
  }
});

describe("launchFingerprinter: a model on a drive that does not answer", () => {
  test("each save or restore asks the files' stats off the loop: a dead mount gives no fingerprint, not a hung core", async () => {
    await using dir = tmpdir();
    const { props } = setup(dir.path);
    const model = props.model_path as string;
    const files = { model: fileIdentity(model), projector: undefined };
    const launch = { props: () => Promise.resolve(props), projector: null, extraArgs: null, files } as never;
    let silent = false;
    let answer = () => {};
    const asked: string[] = [];
    // Answered at once when it answers: a real stat under load outlasted the 1 ms wait.
    const real = await stat(model);
    const drives = new DriveAnswers({
      stat: (p: string) => {
        asked.push(p);
        if (!silent) return Promise.resolve(real);
        return new Promise((resolve) => {
          answer = () => resolve(real);
        });
      },
      statWaitMs: 1,
    });
    const statSync = spyOn(fs, "statSync");
    const fp = launchFingerprinter(launch, llama, drives);
    const atStart = await fp();
    expect(atStart).toBeDefined();
    silent = true;
    expect(await fp()).toBeUndefined();
    expect(await fp()).toBeUndefined();
    expect(asked.filter((p) => p === model)).toHaveLength(2);
    expect(statSync.mock.calls.filter((c) => c[0] === model)).toEqual([]);
    statSync.mockRestore();
    // The drive answers again (the hung stat too: one is asked per file while it hangs).
    silent = false;
    answer();
    expect(await fp()).toBe(atStart);
  });
});

describe("launchFingerprinter: the files' check begun ahead", () => {
  test("a chat's first save or restore takes the check its connection ahead began; the next asks anew", async () => {
    await using dir = tmpdir();
    const { props } = setup(dir.path);
    const model = props.model_path as string;
    const files = { model: fileIdentity(model), projector: undefined };
    const asked: string[] = [];
    const real = await stat(model);
    const drives = new DriveAnswers({
      stat: (p: string) => {
        asked.push(p);
        return Promise.resolve(real);
      },
    });
    let ahead: Promise<string | undefined | "late"> | undefined = Promise.resolve(undefined);
    const take = () => {
      const taken = ahead;
      ahead = undefined;
      return taken;
    };
    const launch = {
      props: async () => props,
      projector: null,
      extraArgs: null,
      files,
      takeFilesAhead: take,
    };
    const fp = launchFingerprinter(launch as never, llama, drives);
    const first = await fp();
    expect(first).toBeDefined();
    expect(asked).toEqual([]);
    expect(await fp()).toBe(first as string);
    expect(asked).toEqual([model]);
    // What the check ahead found stands: a file changed then gives no fingerprint.
    ahead = Promise.resolve("the model file");
    const warn = spyOn(logger, "warn").mockImplementation(() => {});
    try {
      expect(await fp()).toBeUndefined();
    } finally {
      warn.mockRestore();
    }
  });
});
