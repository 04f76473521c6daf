import { expect, spyOn, test } from "bun:test";
import * as fs from "node:fs";
import { join } from "node:path";
import { eraseImported, eraseImportedTail } from "../../src/store/import-v01-erase.ts";
import { logger } from "../../src/util/logger.ts";
import { type HeldFile, holdOpen } from "../fixtures/held-file.ts";
import { refuseOpenForWriting } from "../fixtures/refused-open.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// The 0.1 layout's files an erase removes or rewrites hold the erased words: unlinked alone (or
// replaced by a rename), their blocks keep them (docs/agent.md, The store). A descriptor held
// from before (fixtures/held-file.ts) reads the file's blocks after the core's name is gone, so it
// shows what the disk kept.
const SECRET = "my secret diagnosis, erased by the user";

function layout(dir: string) {
  const user = join(dir, "users", "ann");
  const session = join(user, "sessions", "trip");
  fs.mkdirSync(session, { recursive: true });
  fs.mkdirSync(join(user, "memory"));
  const history = {
    version: 1,
    messages: [
      { role: "user", content: "hello" },
      { role: "assistant", content: "hi" },
      { role: "user", content: SECRET },
      { role: "assistant", content: `about ${SECRET}` },
    ],
  };
  fs.writeFileSync(join(session, "history.json"), JSON.stringify(history));
  const turns = {
    version: 1,
    turns: [
      { id: "1", session_id: "trip", text: `${SECRET}\nanswer`, at: "2025-01-01" },
      { id: "2", session_id: "other", text: "kept\nanswer", at: "2025-01-01" },
    ],
  };
  fs.writeFileSync(join(user, "memory", "turns.json"), JSON.stringify(turns));
  return { user, session, history: join(session, "history.json"), turns: join(user, "memory", "turns.json") };
}

/** Each file held open before the erase: what the disk keeps of it after. */
const holdAll = (...paths: string[]): HeldFile[] => paths.map((p) => holdOpen(p));

const holdsSecret = (file: HeldFile) => file.read().toString("latin1").includes(SECRET);

test("a users.delete's 0.1 files are zeroed before the folder goes", () => {
  using dir = tmpdir();
  const l = layout(dir.path);
  const kept = holdAll(l.history, l.turns);
  eraseImported(dir.path, "ann");
  expect(fs.existsSync(l.user)).toBe(false);
  expect(kept.filter(holdsSecret)).toEqual([]);
});

test("a sessions.delete's session folder is zeroed, and the memory file it rewrote is zeroed after", () => {
  using dir = tmpdir();
  const l = layout(dir.path);
  const kept = holdAll(l.history, l.turns);
  eraseImported(dir.path, "ann", "trip");
  expect(fs.existsSync(l.session)).toBe(false);
  expect(fs.readFileSync(l.turns, "utf8")).toContain("kept");
  expect(kept.filter(holdsSecret)).toEqual([]);
});

test("an edit's rewritten history keeps no erased turn in the old file's blocks", () => {
  using dir = tmpdir();
  const l = layout(dir.path);
  const [oldHistory] = holdAll(l.history);
  const held = (_m: unknown, upTo: number) => upTo;
  eraseImportedTail(dir.path, "ann", "trip", { seq: 2, base: 0, held }, true);
  expect(fs.readFileSync(l.history, "utf8")).not.toContain(SECRET);
  expect(fs.readFileSync(l.history, "utf8")).toContain("hello");
  expect(holdsSecret(oldHistory as HeldFile)).toBe(false);
});

// A file the core cannot open for writing (a read-only file, another owner's) is replaced all the
// same, logged, so that its blocks still holding the words is known (docs/agent.md, The store):
// the memory file an erase rewrote went without a word. Root opens any file for writing: the
// refusal is faked on the open.
test("a rewritten 0.1 file that could not be opened to be zeroed is logged", () => {
  using dir = tmpdir();
  const l = layout(dir.path);
  using _refused = refuseOpenForWriting(l.turns);
  const lines: string[] = [];
  const warn = spyOn(logger, "warn").mockImplementation((line: string) => void lines.push(line));
  try {
    eraseImported(dir.path, "ann", "trip");
  } finally {
    warn.mockRestore();
  }
  expect(fs.readFileSync(l.turns, "utf8")).not.toContain(SECRET);
  expect(lines.filter((line) => line.includes(l.turns) && line.includes("not zeroed"))).toHaveLength(1);
});
