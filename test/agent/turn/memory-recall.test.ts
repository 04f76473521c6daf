import { describe, expect, spyOn, test } from "bun:test";
import type { TurnContext } from "../../../src/agent/turn/context.ts";
import { QUERY_VECTOR_WAIT_MS, recall } from "../../../src/agent/turn/memory.ts";
import { ConfigSchema } from "../../../src/config/schema.ts";
import { statusError } from "../../../src/llama/errors.ts";
import { NOT_LOGGED } from "../../../src/runtime/log-redact.ts";
import type { QueryVector } from "../../../src/store/memory-vectors.ts";
import { Store } from "../../../src/store/store.ts";
import { logger } from "../../../src/util/logger.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

/** A store with one remembered turn of "u" (in session "old") that has a vector; a context asking `input`. */
function setup(
  input: string,
  embedQuery?: (text: string, signal: AbortSignal) => Promise<QueryVector | undefined>,
) {
  const dir = tmpdir("local-ai-recall-");
  const store = Store.open(dir.path);
  store.conversations.commitTurn({
    userId: "u",
    sessionId: "old",
    agent: "a",
    messages: [{ role: "user", content: "my cat Mittens adores salmon" }],
    memoryText: "my cat Mittens adores salmon",
    at: new Date(),
  });
  const id = Number(store.memory.search("u", "Mittens", 1)[0]?.doc.id);
  store.memory.vectors.put("m1", [{ id, vector: [1, 0, 0] }]);
  const ctx = {
    params: { user_id: "u" },
    sessionId: "now",
    traceId: "t",
    session: { state: { user_input: input } },
    deps: {
      config: ConfigSchema.parse({}),
      store: () => store,
      signal: new AbortController().signal,
      ...(embedQuery ? { embedQuery } : {}),
    },
  } as unknown as TurnContext;
  return {
    ctx,
    [Symbol.dispose]: () => {
      store.close();
      dir[Symbol.dispose]();
    },
  };
}

describe("recall with an embedding model", () => {
  test("the input's vector finds a turn sharing no word with it; without one, words alone find none", async () => {
    const asked: string[] = [];
    {
      using s = setup("which fish feeds our kitten", async (text) => {
        asked.push(text);
        return { fingerprint: "m1", vector: [0.9, 0.1, 0] };
      });
      const hits = await recall(s.ctx);
      expect(hits.map((h) => h.doc.text)).toEqual(["my cat Mittens adores salmon"]);
      expect(asked).toEqual(["which fish feeds our kitten"]);
    }
    using plain = setup("which fish feeds our kitten");
    expect(await recall(plain.ctx)).toEqual([]);
  });

  test("a failing embedding leaves recall to words", async () => {
    using s = setup("Mittens", async () => {
      throw new Error("embedding model crashed");
    });
    expect((await recall(s.ctx)).map((h) => h.doc.text)).toEqual(["my cat Mittens adores salmon"]);
  });

  test("an embedding's 500 quoting the input leaves no quoted words in the warning", async () => {
    // The query's request carries the user's input; llama-server's error for a body its parser
    // stopped in quotes what it last read (the shape test/runtime/log-redact.test.ts
    // "withoutQuotes" records). Logged as it was, the input outlived sessions.delete in the logs.
    const body = JSON.stringify({
      error: {
        code: 500,
        message: `[json.exception.parse_error.101] parse error at line 1, column 30: syntax error while parsing value - invalid string: missing closing quote; last read: '"Mittens, my AARDVARK secret'`,
        type: "server_error",
      },
    });
    const lines: string[] = [];
    const warn = spyOn(logger, "warn").mockImplementation((line: string) => void lines.push(line));
    try {
      using s = setup("Mittens, my AARDVARK secret", async () => {
        throw statusError(500, "Internal Server Error", body);
      });
      expect((await recall(s.ctx)).map((h) => h.doc.text)).toEqual(["my cat Mittens adores salmon"]);
    } finally {
      warn.mockRestore();
    }
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(`last read: ${NOT_LOGGED}`);
    expect(lines[0]).not.toMatch(/AARDVARK|secret/);
  });

  test("an embedding slower than the wait is given up on (and aborted): words alone", async () => {
    let aborted = false;
    using s = setup(
      "which fish feeds our kitten",
      (_text, signal) =>
        new Promise((resolve) => {
          signal.addEventListener("abort", () => {
            aborted = true;
            resolve(undefined);
          });
          setTimeout(() => resolve({ fingerprint: "m1", vector: [1, 0, 0] }), QUERY_VECTOR_WAIT_MS * 4);
        }),
    );
    expect(await recall(s.ctx)).toEqual([]);
    expect(aborted).toBe(true);
  });
});
