import { describe, expect, test } from "bun:test";
import { type Block, MAX_PARAGRAPH_CHARS } from "../../src/documents/blocks.ts";
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

  test("an empty comment (`<!-->`, `<!--->`) ends where HTML ends it: the text after it was dropped up to the next `-->`, often the whole page", () => {
    const html = "<p>one</p><!--><p>two</p><!---><p>three</p><!-- a -- b --><p>four</p>";
    expect(blocks(html).map((b) => b.text)).toEqual(["one", "two", "three", "four"]);
  });

  test("a comment ended by `--!>` ends there, as HTML ends it: the text after it was dropped up to the next `-->`", () => {
    // `<!--!>` and `<!---!>` are not ended by it (HTML's comment start states): text in them stays hidden.
    const texts = (html: string) => blocks(html).map((b) => b.text);
    expect(texts("<p>one</p><!-- a --!><p>two</p>")).toEqual(["one", "two"]);
    expect(texts("<!----!><p>two</p>")).toEqual(["two"]);
    expect(texts("<!--!><p>hidden</p>--><p>two</p>")).toEqual(["two"]);
    expect(texts("<!---!><p>hidden</p>--><p>two</p>")).toEqual(["two"]);
  });

  test("a quote after a no-break space after `=` opens nothing: HTML skips its own white space only", () => {
    // HTML's white space is tab, LF, FF, CR and space: `alt=\u00a0'x` is an unquoted value.
    const html = "<p>one</p><img alt=\u00a0'x><p>two</p><p>it's three</p>";
    expect(blocks(html).map((b) => b.text)).toEqual(["one", "two", "it's three"]);
  });

  test("a quote inside an unquoted attribute value opens nothing: the text up to the next such quote was dropped", () => {
    const html = "<p>one</p><img alt=Bob's src=x><p>two</p><p>three</p><p title='a>b'>it's four</p>";
    expect(blocks(html).map((b) => b.text)).toEqual(["one", "two", "three", "it's four"]);
  });

  test("a `=` or quote in a tag's name is the name's, as HTML reads it: `<a='>` opened a value that hid the text up to the next quote", () => {
    const html = "<p>one</p><a='>two</a><p>three'</p>";
    expect(blocks(html).map((b) => b.text)).toEqual(["one", "two", "three'"]);
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

  test("one tag of 16 Mi characters is read a slice at a time, as text is, with the same blocks", () => {
    // Its `>` was looked for in one step (70 ms and more on the main loop), whatever the slice.
    const long = "x".repeat(16 * 1024 * 1024);
    const slice = 64 * 1024;
    for (const html of [
      `<div ${long}>after`,
      `<x-y ${long} a=">">after`,
      `<div ${'a="" '.repeat(4 * 1024 * 1024)}>after`,
      `<script>x</script ${long}>after`,
      `<h2 ${long}>head</h2>`,
    ]) {
      const scan = new HtmlBlocks(html);
      const out: Block[] = [];
      let steps = 0;
      for (let last = 0; !scan.done; last = scan.position) {
        out.push(...scan.step(slice));
        steps++;
        // Quoted values are skipped whole (a native search): these are short.
        expect(scan.position - last).toBeLessThanOrEqual(slice + 16);
      }
      expect(steps).toBeGreaterThan(200);
      expect(out).toEqual(blocks(html.replace(/ x+/, " x")));
    }
  });

  test("a tag split across slices keeps its meaning: quoted `>`, self-closing, a dropped element", () => {
    const html = `<p title="a > b">one</p><script src="x">no</script ><svg/><p>two</p><h3 a='>'>three</h3>`;
    expect(blocks(html, 1)).toEqual(blocks(html));
    expect(blocks(html)).toEqual([
      { kind: "paragraph", text: "one" },
      { kind: "paragraph", text: "two" },
      { kind: "heading", level: 3, text: "three" },
    ]);
  });
  test("numeric references 128-159 are Windows-1252's characters, as browsers read them: legacy pages' quotes and dashes", () => {
    // Word's "Save as HTML" and old sites write don&#146;t, &#147;quoted&#148; and &#150;: they
    // were indexed, quoted to the model and cited as the C1 controls U+0092, U+0093, U+0096.
    const html = "<p>don&#146;t &#147;quoted&#148; 1&#150;2 &#x80;5 &#151; &#133;</p>";
    expect(blocks(html).map((b) => b.text)).toEqual([
      "don\u2019t \u201cquoted\u201d 1\u20132 \u20ac5 \u2014 \u2026",
    ]);
    // The five Windows-1252 leaves undefined stay what they are, as in browsers.
    expect(blocks("<p>a&#129;b&#x9d;c</p>").map((b) => b.text)).toEqual(["a\u0081b\u009dc"]);
  });
  test("a template's or svg's comment opens nothing: a tag named in it hid the rest of the page", () => {
    const texts = (html: string, slice?: number) => blocks(html, slice).map((b) => b.text);
    expect(texts("<template><!-- <template> --><p>t</p></template><p>b</p>")).toEqual(["b"]);
    expect(texts("<svg><!-- old: <svg> -->s</svg><p>b</p>", 3)).toEqual(["b"]);
    // A comment's `</svg>` ends nothing either.
    expect(texts("<svg><!-- </svg> -->s</svg><p>b</p>")).toEqual(["b"]);
  });
  test("an end tag with a `/` after its name ends a dropped element, as in browsers: the rest of the page was dropped", () => {
    const texts = (html: string) => blocks(html).map((b) => b.text);
    expect(texts("<p>a</p><script>x()</script/><p>b</p>")).toEqual(["a", "b"]);
    expect(texts("<p>a</p><style>p{}</STYLE/ ><p>b</p>")).toEqual(["a", "b"]);
    expect(texts("<p>a</p><template><p>t</p></template/><p>b</p>")).toEqual(["a", "b"]);
  });
  test("a reference without its `;` is read as browsers read it in text: the legacy names and numbers", () => {
    // Old pages and hand-written HTML write `&nbsp`, `&copy 2024`, `AT&amp T` and `&#146` bare:
    // the user saw ©, & and ’ where the index, the model's quote and the citation had the markup.
    const texts = (html: string) => blocks(html).map((b) => b.text);
    expect(texts("<p>&copy 2024 AT&amp T caf&#233 don&#146t x&ltb&gtc&copyright</p>")).toEqual([
      "\u00a9 2024 AT& T caf\u00e9 don\u2019t x<b>c\u00a9right",
    ]);
    // A no-break space collapses as white space does; hex digits run on as far as they go.
    expect(texts("<p>a&nbspb &nbspx; &#x41 B&#x41B</p>")).toEqual(["a b x; A B\u041b"]);
    // A name that is no legacy one stays as written without its `;`, as in browsers.
    expect(texts("<p>&mdash &hellip &euro &unknown;</p>")).toEqual(["&mdash &hellip &euro &unknown;"]);
  });
  test("a numeric reference's digits run on as far as they go, as in browsers: none left over as text", () => {
    // Cut at 7 digits (6 hex) once the `;` became optional, `&#00000065;` was read as `&#0000006`
    // and the rest, `5;`, kept as text: the page's "A" indexed as a control and "5;".
    const texts = (html: string) => blocks(html).map((b) => b.text);
    expect(texts("<p>&#00000065; &#x00000041; &#12345678; &#x1234567 x</p>")).toEqual([
      "A A \uFFFD \uFFFD x",
    ]);
  });
  test("a dropped element nested in one of its kind is dropped whole: the outer one's text after the inner end was indexed", () => {
    // A component's <template> holding another (Vue, Polymer, Web Components), an <svg> in an
    // <svg>, an <object>'s fallback <object>: the first end tag ended the drop, and the hidden
    // rest of the outer one was indexed and quoted to the model as the page's text.
    const texts = (html: string) => blocks(html).map((b) => b.text);
    expect(
      texts("<p>a</p><template><p>t1</p><template><p>t2</p></template><p>t3</p></template><p>b</p>"),
    ).toEqual(["a", "b"]);
    expect(
      texts("<p>a</p><svg><text>s1</text><SVG><text>s2</text></svg><text>s3</text></svg><p>b</p>"),
    ).toEqual(["a", "b"]);
    expect(texts("<p>a</p><object data=x><object data=y>o1</object>o2</object><p>b</p>")).toEqual(["a", "b"]);
    // Self-closed inside (an <svg/>), or a raw-text element's look-alike, opens nothing.
    expect(texts("<p>a</p><svg><svg/>s1</svg><p>b</p>")).toEqual(["a", "b"]);
    expect(texts("<p>a</p><script>'<script>'</script><p>b</p>")).toEqual(["a", "b"]);
    // The same whatever the slice.
    const html = "<template><template>x</template>y</template><p>after</p>";
    expect(blocks(html, 7).map((b) => b.text)).toEqual(["after"]);
  });
  test("`/>` closes only an <svg>: a <script/>, <style/>, <template/> or <object/> opens its element, as in browsers", () => {
    // HTML ignores the slash on a start tag but in foreign content (svg): a page's `<script/>`
    // runs on to its `</script>`, whose code was indexed and quoted as the page's text.
    const texts = (html: string, slice?: number) => blocks(html, slice).map((b) => b.text);
    expect(texts("<p>a</p><script/>var secret = 1;</script><p>b</p>")).toEqual(["a", "b"]);
    expect(texts("<p>a</p><STYLE />p{color:red}</style><p>b</p>")).toEqual(["a", "b"]);
    expect(texts("<p>a</p><template/><p>t</p></template><p>b</p>")).toEqual(["a", "b"]);
    // Nested: a <template/> in a template opens another, so the first end tag is the inner one's.
    expect(texts("<template><template/>x</template>y</template><p>b</p>")).toEqual(["b"]);
    expect(texts("<object><object/>x</object>y</object><p>b</p>", 5)).toEqual(["b"]);
    // An <svg/> is whole, in or out of an <svg>.
    expect(texts("<p>a</p><svg/><p>b</p>")).toEqual(["a", "b"]);
  });
});

describe("HTML as browsers tokenize it: raw text, white space, references", () => {
  const texts = (html: string, slice?: number) => blocks(html, slice).map((b) => b.text);

  test("a template's or object's script, style, textarea or title is raw text: a `</template>` in it ends nothing", () => {
    // HTML's tokenizer reads such an element's content as text up to its own end tag (script data,
    // RAWTEXT, RCDATA): taken for the template's end, the rest of the script was indexed as the
    // page's text, and quoted to the model.
    for (const slice of [undefined, 5]) {
      expect(
        texts('<p>a</p><template><script>var s = "</template>"; secret()</script></template><p>b</p>', slice),
      ).toEqual(["a", "b"]);
      expect(
        texts('<template><style>p::after{content:"</template>"} .hidden{}</style></template><p>b</p>', slice),
      ).toEqual(["b"]);
      expect(texts("<template><textarea></template> draft</textarea></template><p>b</p>", slice)).toEqual([
        "b",
      ]);
      expect(texts("<template><TITLE></template> t</title></template><p>b</p>", slice)).toEqual(["b"]);
      expect(texts('<object data=x><script>"</object>"; leak()</script></object><p>b</p>', slice)).toEqual([
        "b",
      ]);
    }
  });

  test("raw text in a template opens nothing: a `<template>` or `<!--` in it hid the rest of the page", () => {
    expect(texts('<template><script>x = "<template>"</script></template><p>b</p>')).toEqual(["b"]);
    expect(texts("<template><textarea><!-- </textarea></template><p>b</p>")).toEqual(["b"]);
    expect(texts("<template><noscript><template></noscript></template><p>b</p>")).toEqual(["b"]);
    // A raw-text element's look-alike (`<scripts>`) is no raw text: the template ends at its end tag.
    expect(texts("<template><scripts></template><p>b</p>")).toEqual(["b"]);
    // A template inside a raw-text element is its text: the element ends at its own end tag.
    expect(texts("<p>a</p><script>'<template>'</script><p>b</p>")).toEqual(["a", "b"]);
    expect(texts("<p>a</p><textarea><template></textarea><p>b</p>")).toEqual(["a", "b"]);
  });

  test("a no-break space is no HTML white space: it ends no tag name, so `</script\u00a0>` ends no script", () => {
    // HTML's tag name runs to tab, LF, FF, CR, space, `/` or `>`: `\s` took U+00A0 for an end,
    // so a script's `</script\u00a0>` ended it and the rest of its code was indexed.
    expect(texts('<p>a</p><script>x = "</script\u00a0>"; hidden()</script><p>b</p>')).toEqual(["a", "b"]);
    expect(texts("<p>a</p><template><p>t</p></template\u00a0><p>t2</p></template><p>b</p>")).toEqual([
      "a",
      "b",
    ]);
    // `<script\u00a0x>` is an unknown element's tag, not a script's: its text is the page's.
    expect(texts("<p>a</p><script\u00a0x>shown</script><p>b</p>")).toEqual(["a", "shown", "b"]);
    expect(blocks("<h1\u00a0id=x>T<p_x>u</p_x>v")).toEqual([{ kind: "paragraph", text: "Tuv" }]);
    // Names are lowered as HTML lowers them, ASCII only: the Kelvin sign is no `k`.
    expect(texts("a<bloc\u212Aquote>b")).toEqual(["ab"]);
    // In text a no-break space reads as the space the page shows, collapsed with its neighbours.
    expect(texts("<p>10\u00a0km &nbsp; away&nbsp;&nbsp;now</p>")).toEqual(["10 km away now"]);
  });

  test("the uppercase legacy names read as browsers read them, with or without `;`; no other case does", () => {
    // `&AMP`, `&COPY`, `&LT`, `&GT`, `&QUOT` and `&REG` are HTML's (legacy, so `;` optional): old
    // pages and generators that upper-case their markup were indexed with the references as text.
    expect(texts("<p>AT&AMP T &COPY 2024 &LT;b&GT &QUOT;q&QUOT &REG; &AMPx;</p>")).toEqual([
      'AT& T \u00a9 2024 <b> "q" \u00ae &x;',
    ]);
    // A name HTML does not have in that case stays as written, `;` or not.
    expect(texts("<p>&Amp &Copy; &aMP &Lt &NBSP; &Nbsp</p>")).toEqual(["&Amp &Copy; &aMP &Lt &NBSP; &Nbsp"]);
  });

  test("HTML's names that start with a legacy one are theirs: `&ltimes;` is no `<` and `imes;`", () => {
    // Browsers match the longest name: read as the legacy name and the rest, the text became
    // other text (`<imes;`, `×b;`, `©sr;`, `>reqless;`), indexed, quoted and cited so.
    expect(texts("<p>&ltimes; &timesb; &copysr; &gtreqless; &gtreqqless; &ltri;</p>")).toEqual([
      "\u22c9 \u22a0 \u2117 \u22db \u2a8c \u25c3",
    ]);
    // Without their `;` they are no names: the legacy one and the rest, as in browsers.
    expect(texts("<p>&ltimes &timesbx &lt3; &copysrx;</p>")).toEqual(["<imes \u00d7bx <3; \u00a9srx;"]);
    // Text cut at MAX_PARAGRAPH_CHARS with no white space is cut before such a name, not inside it.
    const long = `${"x".repeat(MAX_PARAGRAPH_CHARS - 11)}&gtreqqless;y`;
    expect(texts(`<p>${long}</p>`).join("")).toBe(`${"x".repeat(MAX_PARAGRAPH_CHARS - 11)}\u2a8cy`);
  });

  test("Latin-1's names are decoded, and read without their `;` as HTML's legacy ones are", () => {
    // Pages in French, German or Spanish written with references (`caf&eacute;`, `&Uuml;ber`):
    // the index, the model's quote and the citation had the markup where the reader saw letters.
    expect(
      texts("<p>caf&eacute; na&iuml;ve &Uuml;ber &frac12; &szlig &ntilde;o &sect;3 &plusmn1 &yuml;</p>"),
    ).toEqual(["caf\u00e9 na\u00efve \u00dcber \u00bd \u00df \u00f1o \u00a73 \u00b11 \u00ff"]);
    // HTML's longest name wins (`&notin;` is no `&not` and `in;`); without `;`, the legacy one and the rest.
    expect(texts("<p>&notin; &notit; &parallel; &centerdot; &divideontimes; &eacutex &EACUTE;</p>")).toEqual([
      "\u2209 \u00acit; \u2225 \u00b7 \u22c7 \u00e9x &EACUTE;",
    ]);
  });

  test("a script's `<!--<script>` is text up to two `</script>`s, as HTML's tokenizer reads it", () => {
    // After `<!--`, a `<script>` in a script starts "double-escaped" text: its `</script>` ends no
    // script, the next one does, and `-->` goes back to plain script. Ended at the first, the
    // rest of the script ("leak") was indexed as the page's text.
    for (const slice of [undefined, 5]) {
      expect(texts("<p>a</p><script><!--<script>x</script>leak</script><p>b</p>", slice)).toEqual(["a", "b"]);
      expect(
        texts("<template><script><!--<SCRIPT >x</script/>leak</script>t</template><p>b</p>", slice),
      ).toEqual(["b"]);
      // `-->` ends the escape: the next `</script>` ends the script, whatever came before.
      expect(texts("<p>a</p><script><!--<script>--></script><p>b</p>", slice)).toEqual(["a", "b"]);
      expect(texts("<p>a</p><script><!--></script><p>b</p>", slice)).toEqual(["a", "b"]);
      // In an escape with no `<script>`, `</script>` ends the script; `<scripts>` opens nothing.
      expect(texts("<p>a</p><script><!-- x</script><p>b</p>", slice)).toEqual(["a", "b"]);
      expect(texts("<p>a</p><script><!--<scripts></script><p>b</p>", slice)).toEqual(["a", "b"]);
      // A `<script>` with no `<!--` before it is the script's text and opens nothing.
      expect(texts("<p>a</p><script><script></script><p>b</p>", slice)).toEqual(["a", "b"]);
    }
  });

  test("white space collapses as a browser shows it: HTML's own and a no-break space; what shows nothing is dropped", () => {
    // `\s` also took U+FEFF (a BOM pasted mid-text, which shows nothing) for a space: "a\uFEFFb",
    // one word on the page, was indexed as two, and a search for it missed.
    for (const slice of [undefined, 3]) {
      expect(texts("<p>a\uFEFFb ZERO\u200Bwidth co&shy;operate no\u2060break</p>", slice)).toEqual([
        "ab ZEROwidth cooperate nobreak",
      ]);
      // Joiners change how letters are drawn (Persian, emoji sequences): they are the text's.
      expect(
        texts("<p>\u0645\u06cc\u200c\u062e\u0648\u0627\u0645 \u{1F469}\u200d\u{1F4BB}</p>", slice),
      ).toEqual(["\u0645\u06cc\u200c\u062e\u0648\u0627\u0645 \u{1F469}\u200d\u{1F4BB}"]);
      // Other Unicode spaces show as the space they are, each, as in a browser.
      expect(texts("<p>10\u202fkm a\u3000\u3000b \t\r\n\f\u00a0c</p>", slice)).toEqual([
        "10\u202fkm a\u3000\u3000b c",
      ]);
    }
  });

  test("everything after `<plaintext>` is text, as a browser shows it: tags, comments and references as written", () => {
    // HTML's tokenizer never leaves its PLAINTEXT state: the markup after it is what the page shows.
    // Read on as markup, the scripts' and comments' text the reader sees was dropped and tags vanished.
    for (const slice of [undefined, 4]) {
      expect(
        texts('<p>a</p><PLAINTEXT title=">"><p>b</p> &amp; <!-- c --> <script>d</script></plaintext>', slice),
      ).toEqual(["a", "<p>b</p> &amp; <!-- c --> <script>d</script></plaintext>"]);
    }
  });

  test("in a template, an object or an svg a tag's quoted value holds text: a `</template>` in it ends nothing", () => {
    // Taken for the template's end, the rest of the tag and the template (`">leak`) was indexed as the page's text.
    for (const slice of [undefined, 5]) {
      expect(texts('<p>a</p><template><a title="</template>">leak</a></template><p>b</p>', slice)).toEqual([
        "a",
        "b",
      ]);
      expect(texts("<object><img alt='</object>'>leak</object><p>b</p>", slice)).toEqual(["b"]);
      expect(texts('<svg><text x="</svg>">leak</text></svg><p>b</p>', slice)).toEqual(["b"]);
      // Nor does a `<template>` in one open another, or a `<script` in one open raw text.
      expect(texts('<template><a b="<template>" c="<script>">t</a></template><p>b</p>', slice)).toEqual([
        "b",
      ]);
      // A script's attributes are its tag's: its raw text starts after the tag's `>`.
      expect(texts('<template><script src="</script>">x</script></template><p>b</p>', slice)).toEqual(["b"]);
    }
  });

  test("a reference is read within one run of text: a tag or comment inside it makes it none", () => {
    // HTML reads references as it reads the text, so `&am<b></b>p;` shows `&amp;`: joined across
    // the tag before decoding, it was indexed as `&`, other text than the page shows.
    for (const slice of [undefined, 3]) {
      expect(
        texts("<p>&am<b></b>p; AT&<!-- -->amp;T &c<span>opy</span> &#<i>65;</i> a\u0000b</p>", slice),
      ).toEqual(["&amp; AT&amp;T &copy &#65; ab"]);
    }
  });
});
