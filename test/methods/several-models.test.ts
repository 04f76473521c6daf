import { afterAll, describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { defaultConfig } from "../../src/config/load.ts";
import { listModels } from "../../src/models/list.ts";
import { ModelsResultSchema } from "../../src/protocol/models.ts";
import { statusResultSchema } from "../../src/protocol/status.ts";
import { tinyLlama, writeGguf } from "../fixtures/gguf-writer.ts";
import { cpuOnlyMachine } from "../fixtures/hardware.ts";
import { copySecondModel } from "../fixtures/several-models.ts";
import { writeStack } from "../fixtures/stack.ts";
import { startHarness } from "../fixtures/stdio-harness.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// Several models, the protocol's side (issue 28 part 1, docs/protocol.md#modelsload, #embed):
// the params are checked; a core with models entries serves them, one without says so.
const dir = tmpdir();
afterAll(() => dir[Symbol.dispose]());
writeFileSync(
  join(dir.path, "config.yaml"),
  [
    "model: {path: ./main.gguf}",
    "models:",
    "  - {name: big, path: ./big.gguf, pin: true}",
    "  - {name: vec, path: ./vec.gguf, kind: embedding}",
    "agents:",
    "  - {name: assistant}",
    "  - {name: writer, model: big}",
    "",
  ].join("\n"),
);

async function ask(method: string, params: unknown) {
  const h = startHarness({ cwd: dir.path });
  const res = await h.request({ id: 1, method, params }, 20_000);
  h.end();
  await h.exit;
  return res;
}

const MB = 1024 * 1024;

describe("params refused before anything runs, naming the field", () => {
  test.each([
    ["models.load", {}, "model"],
    ["models.load", { model: "" }, "model"],
    ["models.load", { model: "big", pin: "yes" }, "pin"],
    ["models.unload", { model: 5 }, "model"],
    ["models.unload", { model: "big", force: 1 }, "force"],
    ["embed", {}, "input"],
    ["embed", { input: [] }, "input"],
    ["embed", { input: 7 }, "input"],
    ["embed", { input: ["a", 3] }, "input.1"],
    ["embed", { input: Array(2049).fill("a") }, "input"],
    ["embed", { input: ["a", "b", "é".repeat(MB / 2 + 1)] }, "input.2"],
    ["embed", { input: "x".repeat(MB + 1) }, "input"],
    ["embed", { input: "a", model: "" }, "model"],
    ["chat", { model: "" }, "model"],
    ["plan", { model: 3 }, "model"],
  ])("%s, case %#: invalid_request naming %s", async (method, params, field) => {
    const res = await ask(method, params);
    expect(res).toMatchObject({ type: "error", code: "invalid_request", data: { field } });
  });

  test("a list at the limits is accepted as far as the params go", async () => {
    const res = await ask("embed", { input: [...Array(2047).fill("a"), "x".repeat(MB)] });
    // Past the params, the model is loaded: its file is missing here.
    expect(res).toMatchObject({ type: "error", code: "model_missing" });
  });
});

describe("a core with models entries serves them (its files missing here)", () => {
  test.each([
    ["models.load", { model: "big" }],
    ["embed", { input: "hello" }],
    ["embed", { input: ["a"], model: "vec" }],
    ["chat", { input: "hi", model: "big" }],
    ["chat", { input: "hi", agent: "writer" }],
  ])("%s, case %#: the model is loaded, and its missing file said", async (method, params) => {
    const res = await ask(method, params);
    expect(res).toMatchObject({ type: "error", code: "model_missing" });
  });

  test("models.unload of a model not loaded: unloaded false", async () => {
    const res = await ask("models.unload", { model: "vec", force: true });
    expect(res.result).toEqual({ model: "vec", unloaded: false });
  });

  test("an unknown name → model_not_found with the configured names", async () => {
    for (const method of ["models.load", "models.unload"]) {
      const res = await ask(method, { model: "ghost" });
      expect(res.data).toEqual({
        field: "model",
        reason: "model_not_found",
        available: ["default", "big", "vec"],
      });
    }
    const chat = await ask("chat", { input: "hi", model: "ghost" });
    expect(chat.data).toMatchObject({ reason: "model_not_found", available: ["default", "big", "vec"] });
  });

  test("a chat on an embedding model, an embed on a chat model → invalid_request naming model", async () => {
    for (const [method, params] of [
      ["chat", { input: "hi", model: "vec" }],
      ["embed", { input: "hi", model: "big" }],
    ] as const) {
      const res = await ask(method, params);
      expect(res).toMatchObject({ type: "error", code: "invalid_request", data: { field: "model" } });
      expect(res.data.reason).toBeUndefined();
    }
  });

  test("initialize: several models announced; status lists every configured model", async () => {
    const h = startHarness({ cwd: dir.path });
    const init = await h.request({ id: 1, method: "initialize", params: {} });
    expect(init.result.capabilities.models).toEqual({ multiple: true });
    expect(init.result.capabilities.methods).toEqual(
      expect.arrayContaining(["models.load", "models.unload", "embed"]),
    );
    await h.request({ id: 2, method: "models.unload", params: { model: "big" } });
    const status = await h.request({ id: 3, method: "status", params: {} });
    const parsed = statusResultSchema().parse(status.result);
    expect(parsed.memory).toEqual([]);
    expect(parsed.models!.map((m) => [m.name, m.kind, m.state, m.pinned])).toEqual([
      ["default", "chat", "unloaded", false],
      ["big", "chat", "unloaded", true],
      ["vec", "embedding", "unloaded", false],
    ]);
    expect(parsed.models![0]!.path).toBe(join(dir.path, "main.gguf"));
    h.end();
    await h.exit;
  });
});

describe("a core without models entries serves the model section alone", () => {
  test("any other model: model_not_found naming default; initialize says one model", async () => {
    using d = tmpdir();
    writeFileSync(join(d.path, "config.yaml"), "model: {path: ./main.gguf}\n");
    const h = startHarness({ cwd: d.path });
    const init = await h.request({ id: 1, method: "initialize", params: {} });
    expect(init.result.capabilities.models).toEqual({ multiple: false });
    for (const [id, method, params] of [
      [2, "models.load", { model: "/m/other.gguf" }],
      [3, "embed", { input: ["a"], model: "/m/vec.gguf" }],
      [4, "chat", { input: "hi", model: "/m/other.gguf" }],
      [5, "models.load", { model: "default" }],
    ] as const) {
      const res = await h.request({ id, method, params }, 20_000);
      expect(res).toMatchObject({
        type: "error",
        code: "invalid_request",
        data: { field: "model", reason: "model_not_found", available: ["default"] },
      });
      // What is missing is a `models` entry in this config, not a feature of the core.
      expect(res.message).toContain("no `models` entries");
      // `default` is there: the advice is how it is started, not to add it.
      if (id === 5) expect(res.message).toContain("started by `warmup` or a chat");
      else expect(res.message).toContain("add one for");
    }
    h.end();
    await h.exit;
  });
});

describe("docs/protocol.md's examples answer as this core does", () => {
  // A host developer copies these lines; they once showed a core from before several models.
  const docs = readFileSync(join(import.meta.dir, "../../docs/protocol.md"), "utf8").split("\n");
  const example = (start: string) => JSON.parse(docs.find((l) => l.startsWith(start))!.slice(3));

  test("initialize: every capability, method and event a core without models entries announces", async () => {
    using d = tmpdir();
    writeFileSync(join(d.path, "config.yaml"), "model: {path: ./main.gguf}\n");
    const h = startHarness({ cwd: d.path });
    const init = await h.request({ id: 1, method: "initialize", params: {} });
    h.end();
    await h.exit;
    const shown = example('<- {"id":1,"type":"result","result":{"protocol_version"');
    // The harness turns on the test-only methods (docs/protocol.md "Test-only methods").
    const methods = init.result.capabilities.methods.filter((m: string) => !m.startsWith("test."));
    expect(shown.result.capabilities).toEqual({ ...init.result.capabilities, methods });
  });

  test("status: every field, the models rows and memory included, as parsed and as this core sends them", async () => {
    const h = startHarness({ cwd: dir.path });
    const real = (await h.request({ id: 1, method: "status", params: {} })).result;
    h.end();
    await h.exit;
    const keys = (o: object) => Object.keys(o).sort();
    for (const id of [1, 3]) {
      const shown = example(`<- {"id":${id},"type":"result","result":{"llama"`).result;
      expect(keys(shown)).toEqual(keys(real));
      expect(keys(shown.llama)).toEqual(keys(real.llama));
      statusResultSchema().parse(shown);
    }
    const row = example('<- {"id":3,"type":"result","result":{"llama"').result.models[0];
    expect(keys(row)).toEqual(keys(real.models[0]));
  });
});

describe("the models listing names configured files and marks loaded ones", () => {
  test("name from the config, loaded from what the runtime serves", async () => {
    using d = tmpdir();
    for (const f of ["main.gguf", "big.gguf", "loose.gguf"]) writeGguf(d.path, f, tinyLlama());
    const { config } = defaultConfig(d.path);
    const withModels = {
      ...config,
      model: { ...config.model, path: join(d.path, "main.gguf") },
      models: [
        {
          ...config.model,
          name: "big",
          path: join(d.path, "big.gguf"),
          kind: "chat" as const,
          mmproj: "auto",
          pin: false,
          extra_args: [],
        },
      ],
    };
    const result = await listModels(
      {
        config: withModels,
        configDir: d.path,
        cacheDir: join(d.path, "no-cache"),
        loaded: [join(d.path, "big.gguf")],
      },
      { probe: async () => cpuOnlyMachine() },
    );
    expect(ModelsResultSchema.parse(result)).toEqual(result);
    const byFile = Object.fromEntries(result.models.map((m) => [m.file, [m.name, m.loaded]]));
    expect(byFile).toEqual({
      "main.gguf": ["default", false],
      "big.gguf": ["big", true],
      "loose.gguf": [null, false],
    });
  });
});

describe("plan {model}", () => {
  test("a configured name plans that entry with its own keys; a path as before; an unknown name is model_not_found", async () => {
    using d = tmpdir();
    writeGguf(d.path, "main.gguf", tinyLlama());
    writeGguf(d.path, "second.gguf", tinyLlama());
    writeFileSync(
      join(d.path, "config.yaml"),
      "model: {path: ./main.gguf}\nmodels:\n  - {name: second, path: ./second.gguf, extra_args: [--second-only]}\n",
    );
    const h = startHarness({ cwd: d.path });
    const named = await h.request({ id: 1, method: "plan", params: { model: "second" } }, 20_000);
    const byPath = await h.request({ id: 2, method: "plan", params: { model: "./main.gguf" } }, 20_000);
    // A bare word that names no model: model_not_found with the names, as chat answers it.
    const unknown = await h.request({ id: 3, method: "plan", params: { model: "nope" } }, 20_000);
    h.end();
    await h.exit;
    expect(named.result.model.path).toBe(join(d.path, "second.gguf"));
    expect(named.result.plan.argv.join(" ")).toContain("--second-only");
    expect(byPath.result.model.path).toBe(join(d.path, "main.gguf"));
    expect(byPath.result.plan.argv.join(" ")).not.toContain("--second-only");
    expect(unknown.code).toBe("invalid_request");
    expect(unknown.data).toEqual({
      field: "model",
      reason: "model_not_found",
      available: ["default", "second"],
    });
  });
});

describe("models.unload {force} of default ends a warmup waiting for its slot as it ends chats", () => {
  test("the warmup is the model's user: cancelled, 'model \"default\" was unloaded'", async () => {
    using d = tmpdir();
    const release = join(d.path, "release");
    // One slot: the chat holds it (its reply stops after the first token until `release` exists).
    const s = writeStack(d.path, {
      parallel: 1,
      script: [{ content: "one two three", hold_file: release }],
      extraYaml: "models:\n  - {name: big, path: ./second.gguf}\n",
    });
    copySecondModel(d.path);
    const h = startHarness({ cwd: s.dir });
    h.send({ id: "c", method: "chat", params: { input: "hi" } });
    await h.waitFor((ms) => ms.some((m) => m.id === "c" && m.event === "llm_chunk"), 20_000);
    h.send({ id: "w", method: "warmup" });
    // The warmup waits for the one slot (status shows it, no clock involved).
    const slots = async () =>
      (await h.request({ id: `s${h.messages.length}`, method: "status" })).result.models[0].slots;
    while ((await slots())?.waiting !== 1) await Bun.sleep(10);
    const busy = await h.request({ id: "u0", method: "models.unload", params: { model: "default" } });
    expect(busy.data).toEqual({ reason: "model_busy", model: "default", chats: 2 });
    const un = await h.request(
      { id: "u1", method: "models.unload", params: { model: "default", force: true } },
      20_000,
    );
    expect(un.result).toEqual({ model: "default", unloaded: true });
    await h.waitFor(() => h.terminal("w") !== undefined && h.terminal("c") !== undefined, 20_000);
    writeFileSync(release, "");
    for (const id of ["c", "w"])
      expect(h.terminal(id)).toMatchObject({
        type: "error",
        code: "cancelled",
        message: 'model "default" was unloaded',
      });
    await h.request({ id: "x", method: "shutdown" }, 20_000);
    expect(await h.exit).toBe(0);
  });
});
