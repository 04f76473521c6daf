import { expect, test } from "bun:test";
import { Store } from "../../src/store/store.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

test("a snippet is looked for in the first 32K characters of a hit's message only, never the whole of it", () => {
  using dir = tmpdir();
  const store = Store.open(dir.path);
  const MiB = 1024 * 1024;
  const far = `start ${"lorem ".repeat(MiB / 6)} needle ${"ipsum ".repeat(MiB / 6)}`;
  const near = `a needle early on\n\tand ${"x ".repeat(MiB)}`;
  store.conversations.commitTurn({
    userId: "u",
    sessionId: "s",
    agent: "plain",
    messages: [
      { role: "user", content: far },
      { role: "assistant", content: near },
    ],
    at: new Date(),
  });
  const hits = store.search("u", "needle", 10);
  const bySeq = new Map(hits.map((h) => [h.seq, h.snippet]));
  expect(bySeq.get(1)).toStartWith("a **needle** early on and x x");
  // The match 1 MB in is found by the index but not looked for: the message's start, unmarked.
  expect(bySeq.get(0)).toStartWith("start lorem lorem");
  expect(bySeq.get(0)).not.toContain("**");
  for (const s of bySeq.values()) expect(s.length).toBeLessThanOrEqual(110);
  store.close();
});
