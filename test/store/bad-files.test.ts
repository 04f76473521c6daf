import { describe, expect, test } from "bun:test";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { join, resolve } from "node:path";
import type { Warning } from "../../src/protocol/chat.ts";
import { writeFileAtomic } from "../../src/store/atomic.ts";
import { SessionStore } from "../../src/store/session-store.ts";
import { ChatHarness } from "../agent/harness.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

const junk: [string, (p: string) => void][] = [
  ["random bytes", (p) => writeFileSync(p, new Uint8Array([0x00, 0xff, 0x13, 0x7b, 0xc3, 0x28, 0x0a, 0x80]))],
  ["valid JSON of the wrong shape", (p) => writeFileSync(p, JSON.stringify({ version: 1, messages: "no" }))],
  ["a JSON array", (p) => writeFileSync(p, "[1,2,3]")],
  ["a zero-byte file", (p) => writeFileSync(p, "")],
  [
    "a folder in its place",
    (p) => {
      mkdirSync(p);
      writeFileSync(join(p, "inside.txt"), "keep me");
    },
  ],
];

describe("session files full of junk", () => {
  for (const [what, make] of junk) {
    for (const file of ["history", "checkpoint"] as const) {
      test(`${file}: ${what} is moved aside (kept), reported, and a fresh one can be written`, () => {
        using dir = tmpdir();
        const s = new SessionStore(dir.path, "u", "s", () => new Date("2026-01-02T03:04:05.678Z"));
        mkdirSync(s.dir, { recursive: true });
        const path = file === "history" ? s.historyPath : s.checkpointPath;
        make(path);
        const before = statSync(path).isDirectory() ? "dir" : readFileSync(path).toString("hex");
        const warnings: Warning[] = [];
        const loaded = file === "history" ? s.loadHistory(warnings) : s.loadCheckpoint(warnings);
        expect(file === "history" ? loaded : loaded === undefined).toEqual(file === "history" ? [] : true);
        expect(warnings.map((w) => w.code)).toEqual([
          file === "history" ? "history_reset" : "checkpoint_reset",
        ]);
        const aside = `${path}.corrupt-2026-01-02T03-04-05-678Z`;
        expect(warnings[0]?.message).toContain(aside);
        expect(existsSync(path)).toBe(false);
        // Nothing lost: the junk is where the warning says, byte for byte.
        if (before === "dir") expect(readFileSync(join(aside, "inside.txt"), "utf8")).toBe("keep me");
        else expect(readFileSync(aside).toString("hex")).toBe(before);
        if (file === "history") s.saveHistory([{ role: "user", content: "hi" }]);
        else
          s.saveCheckpoint({
            trace_id: "t",
            user_input: "hi",
            agent: "a",
            step: 0,
            parse_errors: 0,
            best_text: "",
            turn: [],
          });
        expect(warnings.length).toBe(1);
        const again: Warning[] = [];
        if (file === "history") expect(s.loadHistory(again)).toHaveLength(1);
        else expect(s.loadCheckpoint(again)?.user_input).toBe("hi");
        expect(again).toEqual([]);
      });
    }
  }

  test.skipIf(process.platform === "win32" || process.getuid?.() === 0)(
    "junk that cannot be moved aside stops the chat with a named error and is left untouched",
    () => {
      using dir = tmpdir();
      const s = new SessionStore(dir.path, "u", "s");
      mkdirSync(s.dir, { recursive: true });
      writeFileSync(s.historyPath, "junk");
      chmodSync(s.dir, 0o500);
      try {
        expect(() => s.loadHistory([])).toThrow(/could not be moved aside/);
        expect(readFileSync(s.historyPath, "utf8")).toBe("junk");
      } finally {
        chmodSync(s.dir, 0o700);
      }
    },
  );

  test("a chat over a junk history and a junk checkpoint warns twice and answers", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    const dir = join(h.dataDir, "users", "default_user", "sessions", "j");
    mkdirSync(join(dir, "history.json"), { recursive: true });
    writeFileSync(join(dir, "checkpoint.json"), "");
    h.llama.script({ content: ["still here"] });
    const { terminal } = await h.chat(1, { input: "hello", session_id: "j" });
    const result = terminal.result as { response: string; warnings: { code: string }[] };
    expect(result.response).toBe("still here");
    expect(result.warnings.map((w) => w.code)).toEqual(["history_reset", "checkpoint_reset"]);
    const files = readdirSync(dir).sort();
    expect(files.filter((f) => f.includes(".corrupt-"))).toHaveLength(2);
    expect(JSON.parse(readFileSync(join(dir, "history.json"), "utf8")).messages).toHaveLength(2);
  });
});

describe("atomic writes under failure", () => {
  test("a failed rename leaves the target as it was and no temp file behind", () => {
    using dir = tmpdir();
    const target = join(dir.path, "f.json");
    mkdirSync(target);
    writeFileSync(join(target, "x"), "old");
    expect(() => writeFileAtomic(target, "new")).toThrow();
    expect(readFileSync(join(target, "x"), "utf8")).toBe("old");
    expect(readdirSync(dir.path)).toEqual(["f.json"]);
  });

  test.skipIf(process.platform === "win32")(
    "a process killed mid-write leaves the old or the new file, never a torn one",
    async () => {
      using dir = tmpdir();
      const target = join(dir.path, "history.json");
      const a = "a".repeat(4_000_000);
      const b = "b".repeat(4_000_000);
      writeFileSync(target, a);
      const child = join(dir.path, "writer.ts");
      writeFileSync(
        child,
        `import { writeFileAtomic } from ${JSON.stringify(resolve(import.meta.dir, "../../src/store/atomic.ts"))};
         const a = "a".repeat(4_000_000), b = "b".repeat(4_000_000);
         process.stdout.write("ready\\n");
         for (let i = 0; ; i++) writeFileAtomic(${JSON.stringify(target)}, i % 2 ? a : b);`,
      );
      for (let round = 0; round < 5; round++) {
        const proc = Bun.spawn([process.execPath, child], { stdout: "pipe", stderr: "inherit" });
        const reader = proc.stdout.getReader();
        await reader.read(); // "ready"
        await Bun.sleep(30 + round * 37); // part of the test: kill it at a different moment each round
        proc.kill("SIGKILL");
        await proc.exited;
        const content = readFileSync(target, "utf8");
        expect(content === a || content === b).toBe(true);
      }
      // What a crash can leave is a temp file beside it, never a changed target.
      for (const f of readdirSync(dir.path))
        expect(["history.json", "writer.ts"].includes(f) || f.endsWith(".tmp")).toBe(true);
    },
    30_000,
  );
});
