import { expect, test } from "bun:test";
import { callOutcome, mayRetry } from "../../src/agent/mcp/call-result.ts";

test("an embedded resource's text reaches the model; a blob, a link and an image stay placeholders", () => {
  // A file server may return a file's contents so: the model was shown only `[resource]`.
  const out = callOutcome({
    content: [
      { type: "text", text: "the file:" },
      { type: "resource", resource: { uri: "repo://a/README.md", mimeType: "text/markdown", text: "# A" } },
      { type: "resource", resource: { uri: "file:///etc/shadow", blob: "AAAA" } },
      // A link is never followed: the core reads no file a server names.
      { type: "resource_link", uri: "file:///etc/passwd", name: "passwd" },
      { type: "image", data: "AAAA", mimeType: "image/png" },
      { type: "resource", resource: { uri: "x", text: 42 } },
    ],
  });
  expect(out.text).toBe("the file:\n# A\n[resource]\n[resource_link]\n[image]\n[resource]");
  expect(out.isError).toBe(false);
});

test("an isError that is no boolean is read neither way: the call fails naming it", () => {
  const text = [{ type: "text", text: "disk full" }];
  for (const [isError, kind] of [
    ["true", "a string"],
    ["false", "a string"],
    [1, "a number"],
    [null, "null"],
    [{}, "an object"],
  ] as const) {
    let thrown: unknown;
    try {
      callOutcome({ content: text, isError });
    } catch (err) {
      thrown = err;
    }
    expect(String(thrown)).toContain(`isError: a boolean was expected, not ${kind}`);
    // The tool ran and answered: the same call would answer so again (and repeat its effects).
    expect(mayRetry(thrown)).toBe(false);
  }
  expect(callOutcome({ content: text, isError: true }).isError).toBe(true);
  expect(callOutcome({ content: text, isError: false }).isError).toBe(false);
});
