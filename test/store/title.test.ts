import { afterEach, describe, expect, test } from "bun:test";
import { SessionsRenameParamsSchema } from "../../src/protocol/sessions.ts";
import { cutNear, PREVIEW_CHARS, previewOf, TITLE_CHARS, titleOf } from "../../src/store/title.ts";

/** The rule as docs/protocol.md states it, on the whole text at once: the oracle. */
function wholeText(text: string, max: number): string {
  const flat = text.replace(/[\s\p{Cc}\u202a-\u202e\u2066-\u2069]+/gu, " ").trim();
  const chars = Array.from(flat);
  if (chars.length <= max) return flat;
  const head = chars.slice(0, max + 1).join("");
  const space = head.lastIndexOf(" ");
  const cut = space >= Math.floor((max * 2) / 3) ? head.slice(0, space) : chars.slice(0, max).join("");
  return `${cut.trimEnd()}…`;
}

const realFrom = Array.from;
const realReplace = String.prototype.replace;
afterEach(() => {
  Array.from = realFrom;
  String.prototype.replace = realReplace;
});

describe("cutNear", () => {
  test("the same title as the rule on the whole text, around every window's edge", () => {
    const pieces = ["a", "bc", " ", "\n\t ", "😀", "é", "longword".repeat(9), "  ", "\u202e", "\0\x1b"];
    let seed = 7;
    const next = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed;
    };
    for (let n = 0; n < 3000; n++) {
      let text = "";
      const parts = next() % 400;
      for (let i = 0; i < parts; i++) text += pieces[next() % pieces.length];
      for (const max of [1, 5, TITLE_CHARS, 120]) expect(cutNear(text, max)).toBe(wholeText(text, max));
    }
  });

  test("trailing and leading white space, a window ending inside a pair, exactly max characters", () => {
    const cases = [
      `${"x".repeat(60)}    `,
      `   ${"x".repeat(61)}`,
      `${"😀".repeat(300)}`,
      `${"a".repeat(243)}😀${"b".repeat(10)}`,
      `${" ".repeat(10_000)}word`,
      "",
      "   ",
    ];
    for (const text of cases) expect(cutNear(text, TITLE_CHARS)).toBe(wholeText(text, TITLE_CHARS));
  });

  test("a title of megabytes of input looks at its head only", () => {
    let biggest = 0;
    Array.from = ((items: Iterable<unknown>) => {
      const out = realFrom(items);
      biggest = Math.max(biggest, out.length);
      return out;
    }) as typeof Array.from;
    const title = titleOf(`Tell me about lighthouses ${"and the sea ".repeat(500_000)}`);
    Array.from = realFrom;
    expect(title).toBe(wholeText(`Tell me about lighthouses ${"and the sea ".repeat(20)}`, TITLE_CHARS));
    expect(biggest).toBeLessThan(1000);
  });

  test("megabytes of white space before the words are not folded again and again", () => {
    // A head grown by doubling folded all its leading white space at each size: 16 MiB of it
    // (a documents.add {text} with no name) held the loop 77 ms for its title.
    let folded = 0;
    String.prototype.replace = function (this: string, ...args: Parameters<string["replace"]>) {
      folded += this.length;
      return realReplace.apply(this, args);
    } as typeof String.prototype.replace;
    const text = `${" \n".repeat(1_000_000)}Tell me about ${"\t".repeat(1_000_000)}lighthouses and the sea`;
    const title = titleOf(text);
    String.prototype.replace = realReplace;
    expect(title).toBe(wholeText(text, TITLE_CHARS));
    expect(folded).toBeLessThan(text.length);
  });
});

test("a title or preview made from a chat's text is what sessions.rename would take: no control character or bidi override", () => {
  // A first message's U+202E reversed what follows the title in a host's list, a NUL or an
  // escape reached the host's terminal: sessions.rename refuses them for that very reason.
  const text = "fix\u202egnp.exe\0 the \x1b[31mred\x1b[0m text\u2066 \x85now\u0007";
  const title = titleOf(text);
  expect(title).toBe("fix gnp.exe the [31mred [0m text now");
  expect(SessionsRenameParamsSchema.safeParse({ session_id: "s", title }).success).toBe(true);
  expect(previewOf(`\u202d${"word ".repeat(40)}`)).toBe(cutNear("word ".repeat(40), PREVIEW_CHARS));
});
