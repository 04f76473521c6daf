import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { loadConfig } from "../../../src/config/load.ts";
import { templateThinks } from "../../../src/llama/chat-template.ts";
import { defaultPlanDeps } from "../../../src/models/local-plan-deps.ts";
import { chatTemplateReport } from "../../../src/plan/decide/chat-template.ts";
import { type PlanDeps, planInputs } from "../../../src/plan/launch.ts";
import { renderPlan } from "../../../src/plan/render.ts";
import { buildPlanReport } from "../../../src/plan/report.ts";
import { llama7b, writeGguf } from "../../fixtures/gguf-writer.ts";
import { cpuOnlyMachine } from "../../fixtures/hardware.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

const CHATML = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}";
const QWEN3ISH = `${CHATML}{% if enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}`;

describe("the chat template's thinking, for the plan", () => {
  test("the markers of current reasoning templates; a plain chatml has none", () => {
    for (const t of [QWEN3ISH, "<|start|>assistant<|channel|>analysis", "[THINK]", "{{ reasoning_effort }}"])
      expect(templateThinks(t)).toBe(true);
    expect(templateThinks(CHATML)).toBe(false);
  });

  // DeepSeek-R1 and its distills as first released: the model opens <think> itself, and the
  // template only cuts the thinking off earlier answers; no <think> in it. Read as not thinking,
  // status and the plan said a model that streams reasoning_content has no think block.
  test("a template that only cuts </think> off earlier answers (DeepSeek-R1 as first released) thinks", () => {
    const r1 =
      "{% for m in messages %}{% if m.role == 'assistant' %}{% set c = m.content %}" +
      "{% if '</think>' in c %}{% set c = c.split('</think>')[-1] %}{% endif %}<｜Assistant｜>{{ c }}" +
      "{% else %}<｜User｜>{{ m.content }}{% endif %}{% endfor %}<｜Assistant｜>";
    expect(templateThinks(r1)).toBe(true);
    expect(chatTemplateReport(r1, [])).toMatchObject({ source: "model", thinking: true });
  });

  test("the model's own template, a file or inline text in extra_args (they win), or none", () => {
    expect(chatTemplateReport(QWEN3ISH, [])).toMatchObject({ source: "model", thinking: true });
    expect(chatTemplateReport(CHATML, [])).toMatchObject({ source: "model", thinking: false });
    expect(chatTemplateReport(null, [])).toMatchObject({ source: "none", thinking: false });
    expect(chatTemplateReport(CHATML, ["--chat-template", "<think>"])).toMatchObject({
      source: "inline",
      thinking: true,
    });
    const args = ["--chat-template-file", "t.jinja"];
    expect(chatTemplateReport(CHATML, args, { path: "t.jinja", text: QWEN3ISH })).toMatchObject({
      source: "file",
      thinking: true,
    });
    expect(
      chatTemplateReport(CHATML, ["--chat-template-file=t.jinja"], { path: "t.jinja", text: CHATML }),
    ).toMatchObject({
      source: "file",
      thinking: false,
    });
    const unread = chatTemplateReport(QWEN3ISH, args, { path: "t.jinja", problem: "no such file" });
    expect(unread).toMatchObject({ source: "file", thinking: null });
    expect(unread.reason).toContain("no such file");
  });

  // Both flags set the one template llama-server applies (common/arg.cpp `params.chat_template`):
  // the later one wins. The file was reported whatever came after it.
  test("with both --chat-template-file and --chat-template, the later one is the template", () => {
    const file = { path: "t.jinja", text: QWEN3ISH };
    const inlineLast = ["--chat-template-file", "t.jinja", "--chat-template", CHATML];
    expect(chatTemplateReport(QWEN3ISH, inlineLast, file)).toMatchObject({
      source: "inline",
      thinking: false,
    });
    const fileLast = ["--chat-template", CHATML, "--chat-template-file=t.jinja"];
    expect(chatTemplateReport(CHATML, fileLast, file)).toMatchObject({ source: "file", thinking: true });
  });

  // An empty template is none (common/chat.cpp common_chat_templates_init: an empty override
  // takes the model's own), the later flag's or a file's: it was judged as text with no think block.
  test("an empty --chat-template or template file leaves the model's own template", () => {
    expect(chatTemplateReport(QWEN3ISH, ["--chat-template", ""])).toMatchObject({
      source: "model",
      thinking: true,
    });
    const file = { path: "t.jinja", text: CHATML };
    expect(
      chatTemplateReport(QWEN3ISH, ["--chat-template-file", "t.jinja", "--chat-template="], file),
    ).toMatchObject({ source: "model", thinking: true });
    const empty = { path: "e.jinja", text: "" };
    expect(chatTemplateReport(QWEN3ISH, ["--chat-template-file", "e.jinja"], empty)).toMatchObject({
      source: "model",
      thinking: true,
    });
  });

  test("the `_` spellings llama-server reads as `-` (common/arg.cpp) name the template too", () => {
    expect(chatTemplateReport(CHATML, ["--chat_template", "<think>"])).toMatchObject({
      source: "inline",
      thinking: true,
    });
    expect(
      chatTemplateReport(CHATML, ["--chat_template_file", "t.jinja"], { path: "t.jinja", text: QWEN3ISH }),
    ).toMatchObject({ source: "file", thinking: true });
  });

  test("planInputs reads the file extra_args name (relative to the core's folder); the report and launch carry it", async () => {
    using dir = tmpdir();
    writeGguf(dir.path, "m.gguf", llama7b({ extra: { "tokenizer.chat_template": CHATML } }));
    writeFileSync(join(dir.path, "config.yaml"), "model:\n  path: ./m.gguf\n");
    const deps: PlanDeps = { readModel: defaultPlanDeps.readModel, probe: async () => cpuOnlyMachine() };
    const own = await planInputs(loadConfig("config.yaml", dir.path).config, deps);
    expect(own.plan.chat_template).toMatchObject({ source: "model", thinking: false });
    expect(own.launch.thinking).toBe(false);

    writeFileSync(
      join(dir.path, "config.yaml"),
      "model:\n  path: ./m.gguf\nllama:\n  extra_args: [--chat-template-file, think.jinja]\n",
    );
    const read: string[] = [];
    const readTemplate = (p: string) => {
      read.push(p);
      return QWEN3ISH;
    };
    const withFile = { ...deps, readTemplate };
    const config = loadConfig("config.yaml", dir.path).config;
    const planned = await planInputs(config, withFile);
    expect(read).toEqual([join(process.cwd(), "think.jinja")]);
    expect(planned.plan.chat_template).toMatchObject({ source: "file", thinking: true });
    expect(planned.launch.thinking).toBe(true);
    const text = renderPlan(await buildPlanReport(config, withFile), false);
    expect(text).toContain("Template  thinking: yes");
  });

  // llama-server reads the file's bytes as they are (common/arg.cpp read_file): only a file of
  // none is no template. One holding a byte-order mark alone (an "empty" file Notepad saved as
  // UTF-8) is the template it applies, with no think block; read with the mark dropped, it was
  // planned as the model's own, thinking.
  test("a template file of a byte-order mark alone is a template; one of no bytes is none", async () => {
    using dir = tmpdir();
    writeGguf(dir.path, "m.gguf", llama7b({ extra: { "tokenizer.chat_template": QWEN3ISH } }));
    const deps: PlanDeps = { readModel: defaultPlanDeps.readModel, probe: async () => cpuOnlyMachine() };
    const planWith = async (bytes: Uint8Array) => {
      const file = join(dir.path, "t.jinja");
      writeFileSync(file, bytes);
      const yaml = `model:\n  path: ./m.gguf\nllama:\n  extra_args: [--chat-template-file, ${JSON.stringify(file)}]\n`;
      writeFileSync(join(dir.path, "config.yaml"), yaml);
      return (await planInputs(loadConfig("config.yaml", dir.path).config, deps)).plan.chat_template;
    };
    expect(await planWith(new Uint8Array([0xef, 0xbb, 0xbf]))).toMatchObject({
      source: "file",
      thinking: false,
    });
    expect(await planWith(new Uint8Array([0xff, 0xfe]))).toMatchObject({ source: "file", thinking: false });
    expect(await planWith(new Uint8Array([]))).toMatchObject({ source: "model", thinking: true });
  });
});
