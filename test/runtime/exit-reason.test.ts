import { describe, expect, spyOn, test } from "bun:test";
import * as fs from "node:fs";
import { readFileSync } from "node:fs";
import { classifyStartExit, modelGone } from "../../src/runtime/exit-reason.ts";
import { DriveAnswers } from "../../src/util/drive-answers.ts";
import { TRANSCRIPTS } from "../fixtures/recordings-dir.ts";

describe("classifyStartExit", () => {
  test("reads the cause from llama-server's own lines", () => {
    const c = (line: string) =>
      classifyStartExit(["0.00.003.802 I srv    load_model: loading model 'm'", line], 1, null);
    expect(
      c("0.00.008.618 E gguf_init_from_file: failed to open GGUF file 'm' (No such file or directory)"),
    ).toMatchObject({
      code: "model_missing",
      retryPort: false,
    });
    expect(
      c("E srv         start: couldn't bind HTTP server socket, hostname: 127.0.0.1, port: 18092"),
    ).toMatchObject({
      retryPort: true,
    });
    expect(c("E llama_model_load: error loading model: unable to allocate CPU buffer").code).toBe(
      "model_plan_error",
    );
    expect(c("error: invalid argument: --bogus-flag").message).toContain("--bogus-flag");
    // extra_args ending in `--alias`: llama.cpp's arg.cpp ("error: invalid argument: %s") meets
    // the address the core's --host gave, as a flag. The config is to blame, not the build.
    const eaten = c("error: invalid argument: 127.0.0.1");
    expect(eaten.message).toContain("extra_args) ends with a flag that takes a value");
    // A GPU's own allocation (ggml-cuda.cu's and llama-model.cpp's format strings) is told from
    // the RAM's: only it makes the launcher plan again with more of the GPU kept free.
    const gpu = [
      "E ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4403.49 MiB on device 0: cudaMalloc failed: out of memory",
      "E llama_model_load: error loading model: unable to allocate CUDA0 buffer",
      "E ggml_vk_create_buffer: vk::Device::allocateMemory: ErrorOutOfDeviceMemory",
      "E ggml_metal_buffer_init: error: failed to allocate buffer, size =  4403.49 MiB",
    ];
    for (const line of gpu) {
      expect(c(line)).toMatchObject({ code: "model_plan_error", outOfMemory: true });
      expect(c(line).message).toContain("out of GPU memory");
    }
    const ram = c(
      "E ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size 68719476736",
    );
    expect(ram.code).toBe("model_plan_error");
    expect(ram.outOfMemory).toBeUndefined();
    // Pinned host buffers (the CPU's layers with mmap off) are RAM, whatever backend names them.
    for (const host of ["CUDA_Host", "Vulkan_Host", "ROCm_Host"]) {
      const pinned = c(`E llama_model_load: error loading model: unable to allocate ${host} buffer`);
      expect(pinned.outOfMemory).toBeUndefined();
      expect(pinned.message).toContain("ran out of memory");
    }
    expect(
      c("E llama_model_load: error loading model: unable to allocate CUDA_Split buffer").outOfMemory,
    ).toBe(true);
    expect(classifyStartExit(["garbage"], null, "SIGSEGV")).toMatchObject({ code: "internal_error" });
    expect(classifyStartExit(["garbage"], null, "SIGSEGV").message).toContain("killed by SIGSEGV");
  });

  // The line goes to the host in the start's error: half an emoji (a model path's) is a lone
  // surrogate, which makes the error line one a strict JSON parser refuses whole.
  test("the last error line quoted is cut between characters", () => {
    const line = `E main: error: ${"p".repeat(284)}😀.gguf`;
    const { message } = classifyStartExit([line], 1, null);
    expect(message).toContain("pppp");
    expect(message.isWellFormed()).toBe(true);
  });

  // Its lines are escaped (llama-log-text.ts): a cut inside `\u{9b}` showed the host a broken escape.
  test("the last error line quoted is cut before an escape it would split", () => {
    const line = `E main: error: ${"p".repeat(283)}\\u{9b}.gguf`;
    const { message } = classifyStartExit([line], 1, null);
    expect(message).toEndWith("p…");
  });

  const cases: [string, string, RegExp][] = [
    ["70-missing-model-path.txt", "model_missing", /cannot be opened/],
    ["71-corrupt-gguf-truncated-half.txt", "model_missing", /truncated/],
    ["71b-not-a-gguf.txt", "model_missing", /not a GGUF/],
    ["71c-empty-file.txt", "model_missing", /not a GGUF/],
    ["71d-model-is-directory.txt", "model_missing", /not a GGUF/],
    ["72-port-in-use.txt", "internal_error", /port in use/],
    ["73-unknown-flag.txt", "internal_error", /--bogus-flag/],
  ];
  for (const [file, code, message] of cases) {
    test(`recorded ${file} → ${code}`, () => {
      const lines = readFileSync(`${TRANSCRIPTS}/${file}`, "utf8")
        .split("\n")
        .filter((l) => !l.startsWith("#") && !l.startsWith("$"));
      const r = classifyStartExit(lines, 1, null);
      expect(r.code).toBe(code as typeof r.code);
      expect(r.message).toMatch(message);
    });
  }
});

describe("modelGone: the model file checked after a failed start", () => {
  test("a drive that does not answer is model_missing saying so, with no synchronous look at the file", async () => {
    const silent = new DriveAnswers({ stat: () => new Promise(() => {}), statWaitMs: 1 });
    const exists = spyOn(fs, "existsSync");
    try {
      const why = await modelGone(["-m", "/mnt/offline/m.gguf", "--port", "1"], silent);
      expect(why).toMatchObject({ code: "model_missing", retryPort: false });
      expect(why?.message).toContain("did not answer");
      expect(exists.mock.calls.filter((c) => c[0] === "/mnt/offline/m.gguf")).toEqual([]);
    } finally {
      exists.mockRestore();
    }
    // A drive that answers: a missing file is the reach message, a present one no verdict.
    const answering = new DriveAnswers();
    expect((await modelGone(["-m", "/no/such/m.gguf"], answering))?.message).toContain("not found");
    expect(await modelGone(["-m", import.meta.path], answering)).toBeUndefined();
  });
});

test("modelGone: a model whose stat was refused (every lane held by other dead paths) is no verdict", async () => {
  // The model's own drive was never asked: the exit's log says why it failed, not "model_missing".
  const drives = new DriveAnswers({ stat: () => new Promise(() => {}), statWaitMs: 1, lanes: 1 });
  expect(await drives.statOf("/mnt/offline/other.gguf")).toBe("late");
  expect(await modelGone(["-m", import.meta.path], drives)).toBeUndefined();
  // Its own drive silent: model_missing, as before.
  expect(await modelGone(["-m", "/mnt/offline/other.gguf"], drives)).toMatchObject({ code: "model_missing" });
});
