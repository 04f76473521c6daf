import { describe, expect, test } from "bun:test";
import { exportParts, exportSession, toMarkdown } from "../../src/store/export.ts";
import type { SessionSummary, StoredMessage } from "../../src/store/message-rows.ts";

const session: SessionSummary = {
  session_id: "s1",
  title: "T",
  agent: "plain",
  created_at: "2026-01-01T00:00:00.000Z",
  updated_at: "2026-01-01T00:00:00.000Z",
  message_count: 2,
  preview: "",
};

function msg(seq: number, role: StoredMessage["role"], content: string): StoredMessage {
  return { seq, role, content, created_at: `2026-01-01T00:00:0${seq}.000Z` };
}

/** The lines a Markdown reader takes as a message heading: `## ` at the start of a line. */
function headings(md: string): string[] {
  return md.split("\n").filter((l) => /^ {0,3}#{1,6}(\s|$)/.test(l));
}

describe("sessions.export markdown", () => {
  test("a message cannot forge a heading, an HTML block or a setext heading", () => {
    const forged = "hi\n## Assistant · 2026-01-01\nyes\n  # Title\n<!-- swallow\nA\n===\nB\n---";
    const md = toMarkdown(session, [msg(0, "user", forged), msg(1, "assistant", "real")]);
    expect(headings(md)).toEqual([
      "# T",
      "## User · 2026-01-01T00:00:00.000Z",
      "## Assistant · 2026-01-01T00:00:01.000Z",
    ]);
    expect(md).toContain("\\## Assistant · 2026-01-01");
    expect(md).toContain("  \\# Title");
    expect(md).toContain("\\<!-- swallow");
    expect(md).toContain("A\n\\===\nB\n\\---");
  });

  test("a tool call's name, which the model wrote, cannot forge a heading: one line of inline code", () => {
    const name = "x`\n\n## User · 2026-01-01T00:00:00.000Z\n\nforged question\n\n``";
    const call = { id: "c", type: "function" as const, function: { name, arguments: "{}" } };
    const md = toMarkdown(session, [
      msg(0, "user", "hi"),
      { ...msg(1, "assistant", ""), tool_calls: [call] },
    ]);
    expect(headings(md)).toEqual([
      "# T",
      "## User · 2026-01-01T00:00:00.000Z",
      "## Assistant · 2026-01-01T00:00:01.000Z",
    ]);
    expect(md).toContain("Tool call ``` x` ## User · 2026-01-01T00:00:00.000Z forged question `` ```:");
  });

  test("a tool call of a million backtick runs is fenced, not a RangeError from a spread", () => {
    const args = "`a".repeat(1_200_000);
    const call = {
      id: "c",
      type: "function" as const,
      function: { name: "`x".repeat(1_200_000), arguments: args },
    };
    const md = toMarkdown(session, [
      msg(0, "user", "hi"),
      { ...msg(1, "assistant", ""), tool_calls: [call] },
    ]);
    expect(md).toContain("```json\n`a`a");
  });

  test("the session's agent name (an imported 0.1 checkpoint's, any text) cannot forge a heading", () => {
    const agent = "a\n\n## User · 2026-01-01T00:00:00.000Z\n\nforged";
    const md = toMarkdown({ ...session, agent }, [msg(0, "user", "hi")]);
    expect(headings(md)).toEqual(["# T", "## User · 2026-01-01T00:00:00.000Z"]);
    expect(md).toContain("agent a ## User · 2026-01-01T00:00:00.000Z forged · started");
  });

  test("a title or agent name holding a tag cannot fold the export away", () => {
    // A title is the first message's words or any one line a rename gave: `<details>` in the
    // heading would fold every message under it.
    const md = toMarkdown({ ...session, title: "What does <details> do?", agent: "a</x>" }, [
      msg(0, "user", "hi"),
    ]);
    expect(md.split("\n").slice(0, 3)).toEqual([
      "# What does \\<details> do?",
      "",
      "Session `s1` · agent a\\</x> · started 2026-01-01T00:00:00.000Z",
    ]);
  });

  test("a fence the message leaves open is closed before the next heading", () => {
    const md = toMarkdown(session, [
      msg(0, "user", "look:\n````py\nx = 1\n## not a heading"),
      msg(1, "assistant", "ok"),
    ]);
    expect(md).toContain("````py\nx = 1\n## not a heading\n````\n\n## Assistant");
  });

  test("fences open and close as a Markdown reader's do: indented 0-3 spaces, a closer with spaces or tabs after", () => {
    // Four spaces in, "```" opens no fence (indented code, or a paragraph's text): what follows is
    // no code, and a heading there would be real.
    const deep = toMarkdown(session, [msg(0, "user", "hi\n    ```\n## Assistant · forged")]);
    expect(deep).toContain("hi\n    ```\n\\## Assistant · forged\n");
    // Nor does it close one, nor does a run with a no-break space after it: the fence is still
    // open at the message's end, and closed there.
    for (const closer of ["    ```", "```\u00a0"]) {
      const md = toMarkdown(session, [
        msg(0, "user", `\`\`\`\ncode\n${closer}\n## in code`),
        msg(1, "assistant", "ok"),
      ]);
      expect(md).toContain(`\`\`\`\ncode\n${closer}\n## in code\n\`\`\`\n\n## Assistant`);
    }
  });

  test("balanced fences stay code, their lines untouched; text keeps its Markdown", () => {
    const text = "**bold** and `code`\n\n~~~\n# comment\n<b>\n~~~\n- item";
    const md = toMarkdown(session, [msg(0, "assistant", text)]);
    expect(md).toContain(`${text}\n`);
  });

  test("a carriage return ends a line as a Markdown reader takes it: no heading forged, no fence missed", () => {
    // CommonMark ends a line at \r\n, \r or \n; a Windows text box sends \r\n.
    const crOnly = toMarkdown(session, [msg(0, "user", "hi\r## Assistant · forged\ryes")]);
    expect(crOnly).toContain("hi\r\\## Assistant · forged\ryes");
    const windows = toMarkdown(session, [
      msg(0, "user", "look:\r\n```py\r\n# comment\r\nx = 1\r\n"),
      msg(1, "assistant", "ok"),
    ]);
    // The fence is seen: its lines untouched, and closed before the next heading.
    expect(windows).toContain("look:\r\n```py\r\n# comment\r\nx = 1\r\n\n```\n\n## Assistant");
  });

  test("a fence's info string with a line separator in it still opens a fence", () => {
    // U+2028 ends no Markdown line: the reader opens the fence, so it is closed at the end.
    const md = toMarkdown(session, [msg(0, "user", "```py\u2028x\n# in code"), msg(1, "assistant", "ok")]);
    expect(md).toContain("```py\u2028x\n# in code\n```\n\n## Assistant");
  });

  test("an HTML tag inside a line cannot close the Thinking block or swallow what follows", () => {
    // Inline raw HTML goes to the page as it is: a `<details>` mid-line folds away every later
    // message, a `</details>` in reasoning ends the Thinking block early.
    const m: StoredMessage = {
      ...msg(1, "assistant", "Wrap it: <details> then <!-- no"),
      reasoning: "use <details> and </details> here",
    };
    const md = toMarkdown(session, [msg(0, "user", "a <textarea> b"), m]);
    expect(md).toContain("a \\<textarea> b");
    expect(md).toContain("use \\<details> and \\</details> here\n\n</details>");
    expect(md).toContain("Wrap it: \\<details> then \\<!-- no");
  });

  test("inside a line, code spans, autolinks and escapes are kept as written; any other tag start escaped", () => {
    const text = "`<details>` and ``a ` <b>`` <https://example.com> \\<i> 1 < 2 a<b \\`<u>";
    const md = toMarkdown(session, [msg(0, "user", text)]);
    expect(md).toContain("`<details>` and ``a ` <b>`` <https://example.com> \\<i> 1 < 2 a\\<b \\`\\<u>");
  });

  test("reasoning cannot close the Thinking block", () => {
    const m: StoredMessage = { ...msg(0, "assistant", "answer"), reasoning: "step\n</details>\n## User" };
    const md = toMarkdown(session, [m]);
    expect(md).toContain("step\n\\</details>\n\\## User\n\n</details>");
  });
});

describe("sessions.export in slices", () => {
  test("the pieces of any split are the whole export byte for byte, JSON as JSON.stringify lays it out", () => {
    const all = [msg(0, "user", 'a "quote"\nand a line'), msg(1, "assistant", "b"), msg(2, "tool", "c")];
    for (const format of ["json", "markdown"] as const) {
      const whole = exportSession(format, session, all);
      if (format === "json") expect(whole).toBe(`${JSON.stringify({ session, messages: all }, null, 2)}\n`);
      else expect(whole).toBe(toMarkdown(session, all));
      const parts = exportParts(format, session);
      const sliced = `${parts.head}${parts.messages(all.slice(0, 1), true)}${parts.messages(all.slice(1), false)}${parts.tail(true)}`;
      expect(sliced).toBe(whole);
      const none = `${parts.head}${parts.tail(false)}`;
      expect(none).toBe(
        format === "json"
          ? `${JSON.stringify({ session, messages: [] }, null, 2)}\n`
          : toMarkdown(session, []),
      );
    }
  });
});
