import { describe, expect, test } from "bun:test";
import type { Block } from "../../src/documents/blocks.ts";
import { HtmlBlocks } from "../../src/documents/html-blocks.ts";

const blocks = (html: string, slice = 1 << 20): Block[] => {
  const scan = new HtmlBlocks(html);
  const out: Block[] = [];
  while (!scan.done) out.push(...scan.step(slice));
  return out;
};

describe("HTML's text, never its markup", () => {
  test("headings stay headings; scripts, styles and comments go; entities are decoded", () => {
    const html = `<!doctype html><html><head><title>T</title><style>p{color:red}</style>
      <script>var s = "<h1>no</h1>";</script></head><body><!-- <p>hidden</p> -->
      <h1 class="x">Main &amp; more</h1><p>caf&#233; &lt;tag&gt; <b>bold</b>&nbsp;end</p>
      <div>one<br>two</div><svg/><p title="a > b">after</p><ul><li>a</li><li>b</li></ul></body></html>`;
    expect(blocks(html)).toEqual([
      { kind: "heading", level: 1, text: "Main & more" },
      { kind: "paragraph", text: "café <tag> bold end" },
      { kind: "paragraph", text: "one" },
      { kind: "paragraph", text: "two" },
      { kind: "paragraph", text: "after" },
      { kind: "paragraph", text: "a" },
      { kind: "paragraph", text: "b" },
    ]);
  });

  test("the same blocks whatever the slice size", () => {
    const html = "<h2>T</h2><p>one two</p><script>x<y</script><p>three &amp; four</p>";
    expect(blocks(html, 3)).toEqual(blocks(html));
  });

  test("megabytes of nested tags: linear, no depth problem", () => {
    const n = 500_000;
    const html = `${"<div><span>".repeat(n)}deep text${"</span></div>".repeat(n)}`;
    expect(html.length).toBeGreaterThan(10_000_000);
    // A scan that kept a stack or went quadratic would run past the test's timeout.
    expect(blocks(html, 64 * 1024)).toEqual([{ kind: "paragraph", text: "deep text" }]);
  });
});
