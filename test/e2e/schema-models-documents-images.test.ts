import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { spawnCore } from "../fixtures/core-process.ts";
import { bertModel } from "../fixtures/gguf-bert.ts";
import { mmproj } from "../fixtures/gguf-mmproj.ts";
import { writeGguf } from "../fixtures/gguf-writer.ts";
import { b64, png } from "../fixtures/images.ts";
import { checkLines, protocolIndex, strictAjv, validator } from "../fixtures/protocol-schema.ts";
import { copySecondModel } from "../fixtures/several-models.ts";
import { writeStack } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// The methods, events and errors of several models, embeddings, documents and images (docs/models.md)
// as a host meets them: every line the compiled core writes validated against
// docs/protocol.schema.json (as test/client/protocol-schema.test.ts does for the first methods).

describe.skipIf(process.platform === "win32")(
  "protocol schema: models, documents, images (compiled core)",
  () => {
    test("every line of a session using them validates, and so does every request", async () => {
      await using dir = tmpdir();
      writeGguf(dir.path, "embed.gguf", bertModel());
      const stack = writeStack(dir.path, {
        tools: [],
        extraYaml: [
          "models:",
          "  - {name: second, path: ./second.gguf, context: 1024}",
          "  - {name: embed, path: ./embed.gguf, kind: embedding}",
        ].join("\n"),
      });
      copySecondModel(dir.path);
      // The default model reads images: its projector beside it.
      writeGguf(dir.path, "mmproj-model-f16.gguf", mmproj());
      const md = join(dir.path, "notes.md");
      writeFileSync(md, "# Okapis\n\nThe OKAPI lives in forests.\n");
      await using core = spawnCore({ cwd: dir.path, env: stack.env });
      const ajv = strictAjv();
      const index = protocolIndex();
      const methodOf = new Map<unknown, string>();
      const send = async (id: string, method: string, params?: Record<string, unknown>) => {
        const request = params ? { id, method, params } : { id, method };
        const schema = index.methods[method]?.request.$ref;
        expect(`${id}: ${schema ? validator(ajv, schema)(request) : "no schema"}`).toBe(`${id}: valid`);
        methodOf.set(id, method);
        return core.request(request, 30_000);
      };
      await send("i", "initialize", { protocol_versions: [1] });
      await send("load", "models.load", { model: "second", pin: true });
      await send("chat2", "chat", { input: "hi", model: "second" });
      await send("nope", "chat", { input: "hi", model: "nope" });
      await send("add", "documents.add", { path: md });
      const pic = { data: b64(png(3, 3)) };
      const chat = await send("chat1", "chat", { session_id: "s", input: "okapi forests?", images: [pic] });
      expect(chat.result.sources.length).toBeGreaterThan(0);
      await send("bad-image", "chat", { input: "x", images: [{ data: b64(Buffer.from("text")) }] });
      const got = await send("get", "sessions.get", { session_id: "s" });
      await send("att", "sessions.attachment", { id: got.result.messages[0].attachments[0].id });
      await send("attach", "documents.add", { text: "The WOMBAT digs.", name: "w.txt", session_id: "s" });
      await send("list", "documents.list", {});
      await send("embed", "embed", { input: ["one", "two"] });
      await send("models", "models");
      await send("status", "status");
      await send("plan", "plan", { model: "second" });
      await send("unload", "models.unload", { model: "second", force: true });
      await send("del", "documents.delete", {
        document_id: (await core.request({ id: "l2", method: "documents.list", params: {} })).result
          .documents[0].document_id,
      });
      methodOf.set("l2", "documents.list");
      methodOf.set("bye", "shutdown");
      await core.request({ id: "bye", method: "shutdown" });
      expect(await core.exited()).toBe(0);

      const { problems, seen } = checkLines(core.rawLines, methodOf);
      expect(problems).toEqual([]);
      for (const kind of [
        "result models.load",
        "result models.unload",
        "result embed",
        "result documents.add",
        "result documents.list",
        "result documents.delete",
        "result sessions.attachment",
        "result chat",
        "error chat",
        "event warmup_progress",
        "event memory_done",
      ])
        expect(seen).toContain(kind);
    }, 90_000);
  },
);
