import { describe, expect, test } from "bun:test";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { spawnCore } from "../fixtures/core-process.ts";
import { coreTemp, forms } from "../fixtures/erased-forms.ts";
import { filesHolding } from "../fixtures/files-holding.ts";
import { bertModel } from "../fixtures/gguf-bert.ts";
import { writeGguf } from "../fixtures/gguf-writer.ts";
import { b64, png } from "../fixtures/images.ts";
import { waitUntil, writeStack } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// The erase promise end to end (docs/agent.md, The store, "Privacy"; docs/protocol.md,
// Conversations): after `sessions.delete` and after `users.delete` no form of what was written
// (UTF-8 as typed and as FTS5 folds it, JSON's `\u` escapes, UTF-16LE, an image's base64) is in
// any file under data_dir (database, its log, FTS and vector indexes, documents, images, the
// saved KV state and its sidecars, llama-server's log, the 0.1 files), in the core's temp folder,
// or in what the core printed on stderr at `debug`; nor after its shutdown's checkpoint.
const onPosix = process.platform !== "win32";

/** Session 1's words: its input (ASCII, Cyrillic), the model's answer, its attachment, its 0.1 file. */
const S1 = ["QZERAONE7", "ЖЮЯФЭЩЪЁ", "QZERATHREE7", "QZERADOC7", "QZERAVONE7"];
/** The rest of the user's: session 2's input, the library document, another 0.1 session. */
const USER = ["QZERATWO7", "QZERALIB7", "QZERAOLD7"];
const PIXELS = "QZERAPIXELS";

function imageForms(image: Buffer): Buffer[] {
  const encoded = b64(image);
  // The pixels' span of the base64 text, whichever 3-byte alignment it was cut at.
  return [Buffer.from(PIXELS), Buffer.from(encoded.slice(encoded.length - 40, encoded.length - 8))];
}

describe.skipIf(!onPosix)("an erase through the compiled binary", () => {
  test("leaves no form of the erased words in any file the core wrote, its temp folder or its log", async () => {
    await using dir = tmpdir();
    writeGguf(dir.path, "embed.gguf", bertModel());
    const stack = writeStack(dir.path, {
      tools: [],
      // Scripted answers: the stand-in's echo would quote session 1's notes into session 2's answer.
      script: [{ content: "Noted QZERATHREE7 for you." }, { content: "Fine." }, { content: "Sure." }],
      extraYaml: [
        "  embedding_model: embed",
        "models:",
        "  - {name: embed, path: ./embed.gguf, kind: embedding}",
      ].join("\n"),
    });
    const projector = join(dir.path, "mmproj.gguf");
    writeFileSync(projector, "");
    const config = readFileSync(join(dir.path, "config.yaml"), "utf8").replace(
      "  stop_grace_s: 1",
      `  stop_grace_s: 1\n  extra_args: ["--mmproj", ${JSON.stringify(projector)}]`,
    );
    writeFileSync(join(dir.path, "config.yaml"), config);
    // 0.1 files, imported at the store's first open: one of session 1, one of another session.
    const v01 = (session: string, words: string) => {
      const folder = join(stack.dataDir, "users", "ann", "sessions", session);
      mkdirSync(folder, { recursive: true });
      const messages = [
        { role: "user", content: `the zebra said ${words}` },
        { role: "assistant", content: "ok" },
      ];
      writeFileSync(join(folder, "history.json"), JSON.stringify({ version: 1, messages }));
    };
    v01("s1", "QZERAVONE7");
    v01("old", "QZERAOLD7");
    const { tmp, env } = coreTemp(dir.path, stack.dataDir, { ...stack.env, LOCAL_AI_LOG_LEVEL: "debug" });
    const image = Buffer.concat([png(4, 4), Buffer.from(PIXELS.repeat(8))]);
    const doc = join(dir.path, "attached.md");
    writeFileSync(doc, "# Zebra\n\nThe zebra attachment word is QZERADOC7.\n");
    const lib = join(dir.path, "library.md");
    writeFileSync(lib, "# Zebra\n\nThe zebra library word is QZERALIB7.\n");

    await using core = spawnCore({
      cwd: dir.path,
      env,
    });
    let id = 0;
    const ask = async (method: string, params: Record<string, unknown>) => {
      const r = await core.request({ id: ++id, method, params: { user_id: "ann", ...params } }, 30_000);
      expect(r).toMatchObject({ type: "result" });
      return r.result;
    };
    const kv = join(stack.dataDir, "kv");
    const savedHolding = (word: string) => waitUntil(() => filesHolding(kv, word).length > 0, 10_000);
    await ask("documents.add", { path: doc, session_id: "s1" });
    await ask("documents.add", { path: lib });
    await ask("chat", {
      session_id: "s1",
      input: "my zebra code is QZERAONE7 ЖЮЯФЭЩЪЁ",
      images: [{ data: b64(image) }],
    });
    expect(await savedHolding("QZERAONE7")).toBe(true);
    // Session 2 recalls session 1: its saved KV state and the notes beside it quote session 1.
    await ask("chat", { session_id: "s2", input: "what was the zebra code QZERATWO7" });
    expect(await savedHolding("QZERATWO7")).toBe(true);
    const quoting = filesHolding(kv, "QZERATWO7").map((f) => f.replace(/\.bin$/, ".json"));
    expect(filesHolding(kv, "QZERAONE7")).toContain(quoting[0] as string);
    for (let i = 0; ; i++) {
      const index = (await core.request({ id: `st${i}`, method: "status" })).result.memory_index;
      if (index?.total > 0 && index.embedded === index.total) break;
      if (i > 100) throw new Error(`not embedded: ${JSON.stringify(index)}`);
      await Bun.sleep(100);
    }

    const everywhere = (markers: string[]) => {
      const hits: string[] = [];
      for (const m of markers) {
        const all = m === PIXELS ? imageForms(image) : forms(m);
        for (const f of all) {
          for (const where of [stack.dataDir, tmp])
            hits.push(...filesHolding(where, f).map((p) => `${m} ${where}/${p}`));
          if (Buffer.from(core.stderr).includes(f)) hits.push(`${m} stderr`);
        }
      }
      return hits;
    };
    // Before: the probe finds each of them (the database's log, the 0.1 files kept aside, the KV
    // state), so it can fail.
    for (const m of [...S1, PIXELS, ...USER]) expect(everywhere([m]).length).toBeGreaterThan(0);
    expect(filesHolding(stack.dataDir, "QZERAVONE7").some((f) => f.startsWith("imported-0.1"))).toBe(true);
    await ask("sessions.delete", { session_id: "s1" });
    expect(everywhere([...S1, PIXELS])).toEqual([]);
    expect((await ask("sessions.search", { query: "QZERAONE7" })).hits).toEqual([]);
    await ask("users.delete", {});
    expect(everywhere([...S1, PIXELS, ...USER])).toEqual([]);
    await core.request({ id: "stop", method: "shutdown" });
    expect(await core.exited(10_000)).toBe(0);
    expect(everywhere([...S1, PIXELS, ...USER])).toEqual([]);
  }, 60_000);

  test("a session quoting the erased one in its unsaved slot: no save after the erase brings it back", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, {
      tools: [],
      script: [{ content: "Noted." }, { content: "Fine." }, { content: "Sure." }],
    });
    const kv = join(stack.dataDir, "kv");
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    let id = 0;
    const ask = async (method: string, params: Record<string, unknown>) => {
      const r = await core.request({ id: ++id, method, params }, 30_000);
      expect(r).toMatchObject({ type: "result" });
      return r.result;
    };
    await ask("chat", { session_id: "s1", input: "my zebra code is QZERAQUOTE7" });
    await ask("chat", { session_id: "s2", input: "what was the zebra code" });
    // No quiet save yet: s2's slot holds s1's words as notes.
    expect(JSON.stringify(stack.llamaRequests().at(-1))).toContain("QZERAQUOTE7");
    await ask("sessions.delete", { session_id: "s1" });
    await Bun.sleep(1500);
    const afterQuiet = filesHolding(kv, "QZERAQUOTE7");
    await core.request({ id: "stop", method: "shutdown" });
    expect(await core.exited(10_000)).toBe(0);
    expect([...afterQuiet, ...filesHolding(stack.dataDir, "QZERAQUOTE7")]).toEqual([]);
  }, 60_000);
});
