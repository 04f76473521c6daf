import { describe, expect, test } from "bun:test";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { chooseChatModel, chooseEmbedModel } from "../../src/config/choose-model.ts";
import { defaultConfig, loadConfig, parseConfigText } from "../../src/config/load.ts";
import { configForModel, configuredModels, modelConfig } from "../../src/config/model-entry.ts";
import { hubCacheDir } from "../../src/models/hf-cache.ts";
import { planDepsWithHub } from "../../src/models/hub-plan-deps.ts";
import { defaultPlanDeps } from "../../src/models/local-plan-deps.ts";
import { planReportWithHub } from "../../src/models/plan-with-hub.ts";
import { PLAN_DIALECT, renderArgv } from "../../src/plan/argv.ts";
import { type PlanDeps, planLaunch } from "../../src/plan/launch.ts";
import { coreErrorOf } from "../fixtures/core-error.ts";
import { llama7b, writeGguf } from "../fixtures/gguf-writer.ts";
import { cpuOnlyMachine } from "../fixtures/hardware.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { layRepo, tinyModel } from "../models/cache-layout.ts";

// Several models (issue 28 part 1, docs/models.md "Several models"): the config and the choice.
const FILE = "/c/config.yaml";
const parse = (text: string) => parseConfigText(text, FILE).config;

const SEVERAL = `
llama:
  extra_args: ["--no-warmup"]
model:
  path: ./main.gguf
  context: 4096
models:
  - name: qwen3-8b
    path: hf:Qwen/Qwen3-8B-GGUF:Q4_K_M
    gpu_layers: 10
    max_tokens: 512
    pin: true
    extra_args: ["--top-k", "20"]
  - name: embed.small
    path: models/tiny-embed.gguf
    kind: embedding
    mmproj: none
  - name: vision
    path: /abs/v.gguf
    mmproj: ./proj/mmproj.gguf
agents:
  - name: assistant
  - name: writer
    model: qwen3-8b
memory:
  embedding_model: embed.small
`;

describe("models: in config.yaml", () => {
  test("a config without models is as before: one model, default, every agent on it", () => {
    const config = parse("model:\n  path: ./m.gguf\n");
    expect(config.models).toEqual([]);
    expect(config.agents.map((a) => a.model)).toEqual(["default"]);
    expect(config.memory.embedding_model).toBeNull();
    expect(config.llama.load_wait_s).toBe(120);
    expect(config.llama.idle_unload_s).toBe(0);
    expect(configuredModels(config)).toEqual([
      { name: "default", kind: "chat", pin: false, path: "/c/m.gguf" },
    ]);
    expect(configForModel(config, "default")).toBe(config);
  });

  test("entries take their defaults, and their paths resolve against the config's folder", () => {
    const config = parse(SEVERAL);
    const [qwen, embed, vision] = config.models;
    expect(qwen).toMatchObject({ kind: "chat", mmproj: "auto", pin: true, context: "auto" });
    expect(qwen!.path).toBe("hf:Qwen/Qwen3-8B-GGUF:Q4_K_M");
    expect(embed).toMatchObject({ kind: "embedding", mmproj: "none", pin: false, extra_args: [] });
    expect(embed!.path).toBe("/c/models/tiny-embed.gguf");
    expect(vision!.mmproj).toBe("/c/proj/mmproj.gguf");
    expect(configuredModels(config)).toEqual([
      { name: "default", kind: "chat", pin: false, path: "/c/main.gguf" },
      { name: "qwen3-8b", kind: "chat", pin: true, path: "hf:Qwen/Qwen3-8B-GGUF:Q4_K_M" },
      { name: "embed.small", kind: "embedding", pin: false, path: "/c/models/tiny-embed.gguf" },
      { name: "vision", kind: "chat", pin: false, path: "/abs/v.gguf" },
    ]);
  });

  test("a model's config: its keys in place of model, its extra_args after llama's; the rest kept", () => {
    const config = parse(SEVERAL);
    const qwen = configForModel(config, "qwen3-8b")!;
    expect(qwen.model).toEqual({
      path: "hf:Qwen/Qwen3-8B-GGUF:Q4_K_M",
      context: "auto",
      gpu_layers: 10,
      max_tokens: 512,
      mmproj: "auto",
    });
    expect(qwen.llama.extra_args).toEqual(["--no-warmup", "--top-k", "20"]);
    expect(qwen.agents).toBe(config.agents);
    expect(config.llama.extra_args).toEqual(["--no-warmup"]);
    expect(configForModel(config, "embed.small")!.model.path).toBe("/c/models/tiny-embed.gguf");
    expect(configForModel(config, "nope")).toBeUndefined();
  });

  test("planLaunch plans an entry from its config: its file, its keys, its extra_args", async () => {
    using dir = tmpdir();
    writeGguf(dir.path, "main.gguf", llama7b());
    writeGguf(dir.path, "second.gguf", llama7b());
    writeFileSync(
      join(dir.path, "config.yaml"),
      "model: {path: ./main.gguf, max_tokens: 100}\nllama: {extra_args: [--foo], idle_sleep_s: 42}\nmodels:\n  - {name: second, path: ./second.gguf, max_tokens: 300, gpu_layers: 0, extra_args: [--bar, '1']}\n",
    );
    const { config } = loadConfig("config.yaml", dir.path);
    const deps: PlanDeps = { readModel: defaultPlanDeps.readModel, probe: async () => cpuOnlyMachine() };
    const main = await planLaunch(configForModel(config, "default")!, deps);
    const second = await planLaunch(configForModel(config, "second")!, deps);
    expect(main.model_path).toBe(join(dir.path, "main.gguf"));
    expect(second.model_path).toBe(join(dir.path, "second.gguf"));
    const argv = (l: typeof main) => renderArgv(l, PLAN_DIALECT).join(" ");
    expect(argv(main)).toContain("--foo");
    expect(argv(main)).not.toContain("--bar");
    expect(argv(second)).toContain("--foo --bar 1");
    // llama.idle_sleep_s applies to each model's own llama-server (docs/models.md "Several models").
    for (const plan of [main, second]) expect(argv(plan)).toContain("--sleep-idle-seconds 42");
  });

  test("a refusal of an entry's hf: path or mmproj names its own key, models.<i>.path / .mmproj", async () => {
    using dir = tmpdir();
    // This test file's own cache (test/preload.ts): two matching files make the ambiguous case.
    const cache = hubCacheDir(process.env, process.env.HOME!);
    layRepo(cache, "org/two", { "a/t-Q4_K_M.gguf": tinyModel(), "b/t-Q4_K_M.gguf": tinyModel() });
    // Taken away after: a file run in the same process after this one lists the same cache.
    await using _laid = {
      [Symbol.asyncDispose]: async () =>
        rmSync(join(cache, "models--org--two"), { recursive: true, force: true }),
    };
    writeGguf(dir.path, "main.gguf", llama7b());
    writeFileSync(
      join(dir.path, "config.yaml"),
      [
        "model: {path: 'hf:org/two:Q4_K_M'}",
        "models:",
        "  - {name: two, path: 'hf:org/two:Q4_K_M'}",
        "  - {name: gone, path: 'hf:org/gone:Q4_K_M'}",
        "  - {name: eyes, path: ./main.gguf, mmproj: 'hf:org/gone:mmproj-F16.gguf'}",
        "  - {name: blind, path: ./main.gguf, mmproj: ./no-mmproj.gguf}",
        "",
      ].join("\n"),
    );
    const { config } = loadConfig("config.yaml", dir.path);
    const deps: PlanDeps = { ...defaultPlanDeps, probe: async () => cpuOnlyMachine() };
    const refusal = (name: string, with_ = deps) =>
      planLaunch(configForModel(config, name)!, with_).then(
        () => expect.unreachable(),
        (e) => e,
      );
    // `default` is the model section: model.path, as before.
    expect((await refusal("default")).data).toMatchObject({ key: "model.path" });
    const two = await refusal("two");
    expect(two.code).toBe("config_invalid");
    expect(two.data).toMatchObject({ key: "models.0.path", matches: ["a/t-Q4_K_M.gguf", "b/t-Q4_K_M.gguf"] });
    expect(two.message).toStartWith("models.0.path ");
    const gone = await refusal("gone");
    expect(gone.code).toBe("model_missing");
    expect(gone.data).toMatchObject({ key: "models.1.path", problem: "not_downloaded" });
    const eyes = await refusal("eyes");
    expect(eyes.code).toBe("model_missing");
    expect(eyes.data).toMatchObject({ key: "models.2.mmproj", problem: "not_downloaded" });
    const blind = await refusal("blind");
    expect(blind.code).toBe("model_plan_error");
    expect(blind.data).toMatchObject({ key: "models.3.mmproj", problem: "absent" });
    // `plan` reads through the hub's deps (offline here): the same keys.
    const offline = planDepsWithHub(deps, { ...process.env, HF_HUB_OFFLINE: "1" });
    expect((await refusal("two", offline)).data).toMatchObject({ key: "models.0.path" });
    expect((await refusal("gone", offline)).data).toMatchObject({ key: "models.1.path" });
  });

  test("a plain path that is absent or not a GGUF names its key too; a request's own model names the field", async () => {
    using dir = tmpdir();
    writeFileSync(join(dir.path, "text.gguf"), "not a gguf at all, just text\n".repeat(10));
    writeFileSync(
      join(dir.path, "config.yaml"),
      "model: {path: ./absent.gguf}\nmodels:\n  - {name: text, path: ./text.gguf}\n",
    );
    const source = {
      loadedConfig: () => loadConfig("config.yaml", dir.path),
      defaultConfig: () => defaultConfig(dir.path),
    };
    const deps = { plan: { ...defaultPlanDeps, probe: async () => cpuOnlyMachine() } };
    const refusal = (model?: string) =>
      planReportWithHub(source, model === undefined ? {} : { model }, {}, deps).then(
        () => expect.unreachable(),
        (e) => e,
      );
    const absent = await refusal();
    expect(absent.code).toBe("model_missing");
    expect(absent.data).toMatchObject({ key: "model.path", problem: "absent" });
    const text = await refusal("text");
    expect(text.code).toBe("model_missing");
    expect(text.data).toMatchObject({ key: "models.0.path", problem: "not_gguf" });
    // A path the request gave is not the config's model.path: the request's field is named.
    const asked = await refusal("./elsewhere.gguf");
    expect(asked.code).toBe("model_missing");
    expect(asked.data).toMatchObject({ field: "model", problem: "absent" });
    expect(asked.data.key).toBeUndefined();
    const hub = await refusal("hf:org/never-pulled:Q4_K_M");
    expect(hub.data.key).toBeUndefined();
    expect(hub.data.field).toBe("model");
  });

  // A chat by a configured model's file runs that model (config/choose-model.ts findModel), its
  // server and keys; plan {model} by that file planned it as a bare path with the model section's
  // keys: another context, another argv, a plan that was not the chat's.
  test("plan {model} by a configured model's file plans that model, as its chat runs it", async () => {
    using dir = tmpdir();
    writeGguf(dir.path, "main.gguf", llama7b());
    writeGguf(dir.path, "small.gguf", llama7b());
    writeFileSync(
      join(dir.path, "config.yaml"),
      "model: {path: ./main.gguf, context: 4096}\nmodels:\n  - {name: small, path: ./small.gguf, context: 1024}\n",
    );
    const source = {
      loadedConfig: () => loadConfig("config.yaml", dir.path),
      defaultConfig: () => defaultConfig(dir.path),
      outOfMemoryStarts: (model: string) => (model === "small" ? 1 : 0),
    };
    const deps = { plan: { ...defaultPlanDeps, probe: async () => cpuOnlyMachine() } };
    const byName = await planReportWithHub(source, { model: "small" }, {}, deps);
    const byPath = await planReportWithHub(source, { model: join(dir.path, "small.gguf") }, {}, deps);
    const relative = await planReportWithHub(source, { model: "./small.gguf" }, {}, deps);
    expect(byName.plan.argv).toContain("1024");
    expect(byPath.plan).toEqual(byName.plan);
    expect(relative.plan).toEqual(byName.plan);
  });

  test("a chat's own model by path has its own projector (auto), as plan {model} and the listing judge it", async () => {
    using dir = tmpdir();
    writeGguf(dir.path, "main.gguf", llama7b());
    writeGguf(dir.path, "other.gguf", llama7b());
    // The model section's projector is main's (here one that is not there): no setting of other.gguf's.
    writeFileSync(
      join(dir.path, "config.yaml"),
      "model: {path: ./main.gguf, mmproj: ./no-such-mmproj.gguf}\n",
    );
    const { config } = loadConfig("config.yaml", dir.path);
    const deps: PlanDeps = { ...defaultPlanDeps, probe: async () => cpuOnlyMachine() };
    const other = join(dir.path, "other.gguf");
    const source = {
      loadedConfig: () => loadConfig("config.yaml", dir.path),
      defaultConfig: () => defaultConfig(dir.path),
    };
    const report = await planReportWithHub(source, { model: other }, {}, { plan: deps });
    expect(report.plan.vision).toBe(false);
    // chat {model: <path>} (server/model-runtime.ts modelConfig) plans it as plan {model} did: it
    // was refused model_plan_error for main's projector, which plan and the listing never gave it.
    const launched = await planLaunch(modelConfig(config, other), deps);
    expect(launched.mmproj ?? null).toBeNull();
    // The model section itself is still refused for its setting, naming it.
    const main = await planLaunch(modelConfig(config, "default"), deps).then(
      () => expect.unreachable(),
      (e) => e,
    );
    expect(main.code).toBe("model_plan_error");
    expect(main.data).toMatchObject({ key: "model.mmproj", problem: "absent" });
  });

  test.each([
    [
      "a duplicate name",
      "models:\n  - {name: a, path: x.gguf}\n  - {name: a, path: y.gguf}\n",
      "models.1.name",
      "listed twice",
    ],
    [
      // Each model's log and pid record are named by it: on macOS and Windows, whose file names
      // ignore case, two such names would share one pid record, and one model's stop remove
      // the other's, so a crashed core's leftover server of it is never found and killed.
      "names that differ in case only",
      "models:\n  - {name: Qwen, path: x.gguf}\n  - {name: qwen, path: y.gguf}\n",
      "models.1.name",
      "case",
    ],
    ["default as a name", "models:\n  - {name: default, path: x.gguf}\n", "models.0.name", "'default'"],
    ["a name with a space", "models:\n  - {name: 'a b', path: x.gguf}\n", "models.0.name", "A-Z"],
    ["a name too long", `models:\n  - {name: ${"n".repeat(65)}, path: x.gguf}\n`, "models.0.name", "64"],
    ["an entry without a path", "models:\n  - {name: a}\n", "models.0.path", "expected string"],
    ["a bad hf: reference", "models:\n  - {name: a, path: 'hf:nope'}\n", "models.0.path", "org/name"],
    ["an unknown kind", "models:\n  - {name: a, path: x.gguf, kind: vision}\n", "models.0.kind", "chat"],
    ["pin not a bool", "models:\n  - {name: a, path: x.gguf, pin: maybe}\n", "models.0.pin", "boolean"],
    ["an agent naming an unknown model", "agents:\n  - {name: w, model: ghost}\n", "agents.0.model", "ghost"],
    [
      "an embedding model as an agent's",
      "models:\n  - {name: e, path: e.gguf, kind: embedding}\nagents:\n  - {name: a}\n  - {name: w, model: e}\n",
      "agents.1.model",
      "embedding",
    ],
    [
      "memory.embedding_model unknown",
      "memory:\n  embedding_model: ghost\n",
      "memory.embedding_model",
      "ghost",
    ],
    [
      "memory.embedding_model of kind chat",
      "models:\n  - {name: c, path: c.gguf}\nmemory:\n  embedding_model: c\n",
      "memory.embedding_model",
      "kind chat",
    ],
    ["load_wait_s zero", "llama:\n  load_wait_s: 0\n", "llama.load_wait_s", ""],
    ["idle_unload_s negative", "llama:\n  idle_unload_s: -1\n", "llama.idle_unload_s", ""],
  ])("%s → config_invalid naming its key", (_why, text, key, words) => {
    const err = coreErrorOf(() => parse(text));
    expect(err.code).toBe("config_invalid");
    expect(err.data!.key).toBe(key);
    expect(err.message).toContain(key);
    expect(err.message).toContain(words);
  });
});

describe("choosing a model", () => {
  const config = parse(SEVERAL);
  const writer = config.agents[1];

  test("a chat: the param, else the agent's model, else default", () => {
    expect(chooseChatModel(config, undefined, undefined).name).toBe("default");
    expect(chooseChatModel(config, undefined, config.agents[0]).name).toBe("default");
    expect(chooseChatModel(config, undefined, writer).name).toBe("qwen3-8b");
    expect(chooseChatModel(config, "vision", writer)).toMatchObject({ kind: "configured", name: "vision" });
    expect(chooseChatModel(config, "default", writer).name).toBe("default");
  });

  test("a path or hf: reference: an absolute path or a reference as given, a relative one made absolute", () => {
    for (const ref of ["/m/other.gguf", "hf:org/name:Q8_0"])
      expect(chooseChatModel(config, ref, writer)).toEqual({ kind: "path", name: ref });
    for (const ref of ["models/x.gguf", "other.GGUF"])
      expect(chooseChatModel(config, ref, writer)).toEqual({
        kind: "path",
        name: join(process.cwd(), ref),
        asGiven: ref,
      });
  });

  test("an unknown name → invalid_request, model_not_found, with the names", () => {
    const err = coreErrorOf(() => chooseChatModel(config, "ghost", writer));
    expect(err.code).toBe("invalid_request");
    expect(err.data).toEqual({
      field: "model",
      reason: "model_not_found",
      available: ["default", "qwen3-8b", "embed.small", "vision"],
    });
    expect(err.message).toContain("ghost");
  });

  test("an embedding model for a chat, a malformed hf: reference → invalid_request naming model", () => {
    for (const ref of ["embed.small", "hf:"]) {
      const err = coreErrorOf(() => chooseChatModel(config, ref, undefined));
      expect(err.code).toBe("invalid_request");
      expect(err.data!.field).toBe("model");
      expect(err.message).toStartWith("model: ");
    }
  });

  test("embed: the param, else memory.embedding_model, else the first of kind embedding", () => {
    expect(chooseEmbedModel(config, undefined).name).toBe("embed.small");
    const two = parse(
      "models:\n  - {name: c, path: c.gguf}\n  - {name: e1, path: e1.gguf, kind: embedding}\n  - {name: e2, path: e2.gguf, kind: embedding}\n",
    );
    expect(chooseEmbedModel(two, undefined).name).toBe("e1");
    expect(chooseEmbedModel(two, "e2").name).toBe("e2");
    expect(
      chooseEmbedModel(
        parse(
          "models:\n  - {name: e1, path: e1.gguf, kind: embedding}\n  - {name: e2, path: e2.gguf, kind: embedding}\nmemory:\n  embedding_model: e2\n",
        ),
        undefined,
      ).name,
    ).toBe("e2");
    // A path not configured has no kind: refused before anything loads (it would run as a chat model).
    const byPath = coreErrorOf(() => chooseEmbedModel(two, "/m/e.gguf"));
    expect(byPath).toMatchObject({
      code: "invalid_request",
      data: { field: "model", available: ["e1", "e2"] },
    });
    expect(byPath.message).toContain("not a configured model");
    // The file of a configured embedding model, by its path, is that model.
    expect(chooseEmbedModel(two, "/c/e2.gguf").name).toBe("e2");
  });

  test("embed: none configured, or a chat model → invalid_request naming model", () => {
    for (const [cfg, param] of [
      [parse(""), undefined],
      [config, "qwen3-8b"],
      [config, "default"],
    ] as const) {
      const err = coreErrorOf(() => chooseEmbedModel(cfg, param));
      expect(err.code).toBe("invalid_request");
      expect(err.data!.field).toBe("model");
    }
    expect(coreErrorOf(() => chooseEmbedModel(config, "ghost")).data!.reason).toBe("model_not_found");
  });
});
