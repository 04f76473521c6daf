import { describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { MemoryIndex } from "../../src/store/memory-index.ts";
import { ChatHarness, type Msg } from "../agent/harness.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// Issue 10 item 10: a memory file with one bad entry was discarded and overwritten. Like a
// corrupt history it is now kept aside, its valid entries stay, and the chat says so once.

const turn = (id: string, text: string) => ({ id, session_id: "old", text, at: "2026-01-01T00:00:00Z" });
const GOOD = [turn("t1", "my bike is red"), turn("t2", "the cat is called Miso")];

function writeTurns(dataDir: string, user: string, content: string): string {
  const dir = join(dataDir, "users", user, "memory");
  mkdirSync(dir, { recursive: true });
  const file = join(dir, "turns.json");
  writeFileSync(file, content);
  return file;
}

const withOneBadEntry = JSON.stringify({
  version: 1,
  turns: [GOOD[0], { id: 7, text: null }, GOOD[1]],
});

describe("a corrupt memory file", () => {
  test("one bad entry: the good ones still retrieve, the file is kept aside, one warning", () => {
    using dir = tmpdir();
    const file = writeTurns(dir.path, "u", withOneBadEntry);
    const m = MemoryIndex.forUser(dir.path, "u", [], () => new Date("2026-01-02T03:04:05.678Z")).load();
    expect(m.search("what colour is my bike", 1).map((h) => h.doc.id)).toEqual(["t1"]);
    expect(m.search("cat name", 1).map((h) => h.doc.id)).toEqual(["t2"]);

    const aside = `${file}.corrupt-2026-01-02T03-04-05-678Z`;
    expect(readFileSync(aside, "utf8")).toBe(withOneBadEntry);
    // The valid entries are written back at once, so the next process has them too.
    expect(JSON.parse(readFileSync(file, "utf8")).turns).toEqual(GOOD);

    const warnings = m.takeWarnings();
    expect(warnings.map((w) => w.code)).toEqual(["memory_corrupt"]);
    expect(warnings[0]?.message).toContain(aside);
    expect(warnings[0]?.message).toContain("1 of 3");
    expect(m.takeWarnings()).toEqual([]);

    m.addTurn(turn("t3", "tea without sugar"));
    const again = MemoryIndex.forUser(dir.path, "u", []).load();
    expect(again.size).toBe(3);
    expect(again.takeWarnings()).toEqual([]);
  });

  for (const [what, content] of [
    ["not JSON", "{ not json"],
    ["the wrong shape", JSON.stringify({ version: 1, turns: "none" })],
    ["an unknown version", JSON.stringify({ version: 2, turns: GOOD })],
    ["an empty file", ""],
    ["JSON null", "null"],
  ] as const) {
    test(`${what}: kept aside, memory starts afresh, one warning`, () => {
      using dir = tmpdir();
      const file = writeTurns(dir.path, "u", content);
      const m = MemoryIndex.forUser(dir.path, "u", []).load();
      expect(m.size).toBe(0);
      const asides = readdirSync(join(dir.path, "users", "u", "memory")).filter((f) =>
        f.includes(".corrupt-"),
      );
      expect(asides).toHaveLength(1);
      expect(readFileSync(join(dir.path, "users", "u", "memory", asides[0] as string), "utf8")).toBe(content);
      expect(existsSync(file)).toBe(false);
      expect(m.takeWarnings().map((w) => w.code)).toEqual(["memory_corrupt"]);
    });
  }

  test("one that cannot be moved aside is used but never written over", () => {
    using dir = tmpdir();
    const file = writeTurns(dir.path, "u", withOneBadEntry);
    // A non-empty folder where the file would go: the rename fails, even for root.
    const at = new Date("2026-01-02T03:04:05.678Z");
    mkdirSync(`${file}.corrupt-2026-01-02T03-04-05-678Z/x`, { recursive: true });
    const m = MemoryIndex.forUser(dir.path, "u", [], () => at).load();
    expect(m.size).toBe(2);
    const [warning] = m.takeWarnings();
    expect(warning?.code).toBe("memory_corrupt");
    expect(warning?.message).toContain("not saved");
    m.addTurn(turn("t3", "tea"));
    expect(readFileSync(file, "utf8")).toBe(withOneBadEntry);
    expect(m.size).toBe(3);
  });

  test("built by a warm-up before the first chat: that chat still carries the warning", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain", system_prompt: "Be brief." }] });
    writeTurns(h.dataDir, "default_user", withOneBadEntry);
    h.services.memories().get("default_user");
    h.llama.script({ content: ["ok"] });
    const { terminal } = await h.chat(1, { input: "hello", session_id: "s1" });
    expect((terminal.result as { warnings: { code: string }[] }).warnings.map((w) => w.code)).toEqual([
      "memory_corrupt",
    ]);
  });

  test("through a chat: the result warns once, the good entries still reach the prompt", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain", system_prompt: "Be brief." }] });
    const file = writeTurns(h.dataDir, "default_user", withOneBadEntry);
    h.llama.script({ content: ["ok"] }, { content: ["ok again"] });
    const first = await h.chat(1, { input: "what colour is my bike?", session_id: "s1" });
    const result = first.terminal.result as { warnings: { code: string; message: string }[] };
    expect(result.warnings.map((w) => w.code)).toEqual(["memory_corrupt"]);
    expect((first.events.find((e: Msg) => e.event === "memory_done") as Msg).hits).toBeGreaterThan(0);
    expect(JSON.stringify(h.llama.requests[0])).toContain("my bike is red");
    expect(
      readdirSync(join(h.dataDir, "users", "default_user", "memory")).some((f) => f.includes(".corrupt-")),
    ).toBe(true);
    // Memory now holds the two good entries and this turn.
    expect(JSON.parse(readFileSync(file, "utf8")).turns).toHaveLength(3);

    const second = await h.chat(2, { input: "and the cat?", session_id: "s1" });
    expect((second.terminal.result as { warnings: unknown[] }).warnings).toEqual([]);
  });
});
