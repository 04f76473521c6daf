import { describe, expect, test } from "bun:test";
import { FORMS, perTest, type RunningStandIn } from "./forms.ts";
import { RECORDINGS } from "./recordings.ts";
import { readExchanges, type Transcript } from "./transcript.ts";

// transcripts/20d: a lone UTF-16 surrogate escaped in a body's string is valid JSON that
// llama-server's parser refuses whole (a 500 whose message quotes what it read); the stand-in,
// whose own JSON.parse would take it, answers the same, byte for byte.

const [chat, tokenize, embed] = readExchanges(RECORDINGS, "20d-err-lone-surrogate.txt") as [
  Transcript,
  Transcript,
  Transcript,
];

for (const form of FORMS) {
  describe(`a lone surrogate in a request body (${form.name})`, () => {
    const { start } = perTest(form);
    const sameAnswer = async (s: RunningStandIn, t: Transcript) => {
      const res = await fetch(`${s.baseUrl}${t.path}`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: t.requestBody,
      });
      expect(res.status).toBe(t.status);
      expect(await res.text()).toBe(t.body.trim());
    };

    test("chat and /tokenize refuse the body with the recorded message (20d)", async () => {
      const s = await start({ open: true });
      await sameAnswer(s, chat);
      await sameAnswer(s, tokenize);
    });

    test("/v1/embeddings refuses it too (20d)", async () => {
      const s = await start({ open: true, embedding: { flags: ["--embeddings"] } });
      await sameAnswer(s, embed);
    });

    test("a surrogate pair, and a backslash before u, are text", async () => {
      const s = await start({ open: true });
      for (const content of ["\\ud83d\\ude00", "\\\\ud800"]) {
        const res = await fetch(`${s.baseUrl}/tokenize`, {
          method: "POST",
          headers: { "Content-Type": "application/json" },
          body: `{"content":"${content}"}`,
        });
        expect(res.status).toBe(200);
      }
    });
  });
}
