import { afterLastSpace, wholeCharCut } from "../util/text-cut.ts";
import { type Block, MAX_PARAGRAPH_CHARS } from "./blocks.ts";
import { decodeEntities } from "./html-entities.ts";

/**
 * HTML's text as blocks, never its markup (docs/agent.md "Documents"). A flat scan, not a tree:
 * a tag only opens or closes a block, so megabytes of nested tags cost no depth and linear time
 * (Bun's HTMLRewriter, tried first, took minutes on 500,000 nested tags with end-tag handlers).
 * `h1`–`h6` are headings; other block tags and `<br>` end a paragraph; the content of DROPPED's
 * elements (script, style, template, svg, title, textarea...) and comments is dropped (nested
 * templates, svgs and objects by a count of their depth, still no stack; a template's or
 * object's raw text, its script say, read to its own end tag, a script's as HTML reads its
 * `<!--<script>`); after
 * `<plaintext>` all is text; white space collapses, a no-break space with it.
 * `step` works through a slice at a time so the reader can give the loop back between slices;
 * text gathered past MAX_PARAGRAPH_CHARS is handed on as a paragraph then, cut at white space
 * (docs/agent.md "Off the main loop"), so no block tag is needed to end one.
 */
const BLOCK_TAGS = new Set(
  "p div br li ul plaintext ol dl dt dd tr td th table thead tbody tfoot caption section article aside header footer nav main blockquote pre figure figcaption hr form fieldset legend details summary address".split(
    " ",
  ),
);
const DROPPED = new Set([
  "script",
  "style",
  "template",
  "noscript",
  "svg",
  "title",
  "textarea",
  "iframe",
  "object",
]);
/**
 * Dropped elements that nest in HTML (the others' content is raw text, where `<script>` opens
 * nothing): their drop counts a depth, so an inner end tag does not end the outer one.
 */
const NESTING = new Set(["template", "svg", "object"]);
/**
 * Elements whose content HTML's tokenizer reads as text up to their own end tag (script data,
 * RAWTEXT, RCDATA): in a dropped template or object a `</template>`, `<template>` or `<!--` in one
 * is its text, and ends or opens nothing. Not in an svg, whose `<style>` is foreign content.
 */
const RAW_TEXT = new Set("script style textarea title xmp iframe noembed noframes noscript".split(" "));
/** What ends a tag's name in HTML: its own white space, `/` or `>` (a `\s` took U+00A0 for one). */
const NAME_END = "(?=[\\t\\n\\f\\r />])";
/** A tag's name as HTML reads it, a letter then up to NAME_END (`<script\u00a0x>` is no script). */
const NAME_CHAR = "[^\\t\\n\\f\\r />]";
const TAG_NAME = new RegExp(`^</?([a-zA-Z]${NAME_CHAR}*)`);
/** HTML's white space: tab, LF, FF, CR, space. */
const HTML_SPACE = new Set(["\t", "\n", "\f", "\r", " "]);

/**
 * White space that collapses, each run one space: HTML's own and a no-break space (docs/agent.md
 * "Documents"). Not `\s`: it took U+FEFF, which shows nothing, for a space, and other Unicode
 * spaces (U+3000, U+202F) show as written.
 */
const COLLAPSED = /[\t\n\f\r \u00a0]+/g;
/**
 * What a browser shows nothing for and that says nothing of the letters: a soft hyphen, a zero
 * width space, a word joiner, a BOM; and U+0000 (RUN_END). Dropped, so the index has the word the page shows; the
 * joiners (U+200C, U+200D) are kept, they change how letters are drawn.
 */
const INVISIBLE = /[\u0000\u00ad\u200b\u2060\ufeff]/g;
/**
 * Gathered where markup ends a run of text, so no reference spans two, and dropped with the
 * invisible ones after decoding: U+0000 is never the page's text (HTML's tree builder drops it).
 */
const RUN_END = "\u0000";

export class HtmlBlocks {
  private at = 0;
  private text: string[] = [];
  /** Characters in `text`. */
  private size = 0;
  /** The next `<` at or after `at` (the length when none), found once, not once per slice. */
  private lt = -1;
  private heading: number | undefined;
  /** The next `-->` and `--!>` where they were last looked for (the length when none): see `commentEnd`. */
  private readonly ends = { dashes: -1, bang: -1 };
  /** A tag whose `>` is not reached yet: read on in the next slice (a tag may be megabytes long). */
  private reading: Tag | undefined;
  /** A dropped element's content being skipped, perhaps over several slices (`dropOn`). */
  private dropping: Dropping | undefined;
  private readonly out: Block[] = [];
  /** After `<plaintext>`: the rest is text, which HTML's tokenizer never leaves (its PLAINTEXT state). */
  private plain = false;

  constructor(private readonly html: string) {}

  get position(): number {
    return this.at;
  }

  get done(): boolean {
    return this.at >= this.html.length;
  }

  /** Scans about `chars` more characters; returns the blocks completed meanwhile. */
  step(chars: number): Block[] {
    const until = Math.min(this.html.length, this.at + chars);
    while (this.at < until) {
      if (this.reading) {
        this.at = this.tagRest(this.reading, this.at, until);
        continue;
      }
      if (this.plain) {
        // Its text is shown as written, so a `&` in it is one: escaped for `flush`'s decoding.
        this.gather(this.html.slice(this.at, until).replaceAll("&", "&amp;"));
        this.at = until;
        continue;
      }
      if (this.dropping) {
        this.at = this.dropOn(this.dropping, until);
        continue;
      }
      if (this.lt < this.at) this.lt = at(this.html.indexOf("<", this.at), this.html.length);
      const end = Math.min(this.lt, until);
      if (end > this.at) this.gather(this.html.slice(this.at, end));
      // Markup ends a run of text, and a reference with it (`&am<b></b>p;` is no `&amp;`).
      if (end === this.lt && this.size > 0 && this.text[this.text.length - 1] !== RUN_END)
        this.gather(RUN_END);
      this.at = end < this.lt || end === this.html.length ? end : this.markup(end, until);
    }
    if (this.done) this.flush();
    return this.out.splice(0);
  }

  private gather(text: string): void {
    this.text.push(text);
    this.size += text.length;
    while (this.size > MAX_PARAGRAPH_CHARS) {
      const all = this.text.join("");
      const cut = textCut(all, MAX_PARAGRAPH_CHARS);
      this.text = [all.slice(0, cut)];
      this.flush();
      this.text = [all.slice(cut)];
      this.size = all.length - cut;
    }
  }

  /**
   * Just past the end of the comment opened at `lt`, or the end, as HTML's tokenizer ends one: a
   * `-->` from its second dash (`<!-->` and `<!--->` are whole, empty comments; looked for past
   * `<!--`, they hid the text up to the next comment's end, often all of it), or a `--!>` after
   * `<!--` (`<!-- a --!>`: with `-->` alone looked for, it hid the text after it alike). Each
   * token's next place is found once, not once per comment: a page of comments ended by one
   * kind, the other far off or absent, was read to the end again for every comment.
   */
  private commentEnd(lt: number): number {
    const h = this.html;
    if (this.ends.dashes < lt + 2) this.ends.dashes = at(h.indexOf("-->", lt + 2), h.length);
    if (this.ends.bang < lt + 4) this.ends.bang = at(h.indexOf("--!>", lt + 4), h.length);
    const { dashes, bang } = this.ends;
    if (bang < dashes) return bang + 4;
    return dashes === h.length ? h.length : dashes + 3;
  }

  /** The markup at `lt`; returns where the text after it starts, or where a tag's reading stopped at `until`. */
  private markup(lt: number, until: number): number {
    const h = this.html;
    if (h.startsWith("<!--", lt)) return this.commentEnd(lt);
    if (h[lt + 1] === "!" || h[lt + 1] === "?") return after(h, ">", lt + 2);
    const name = asciiLower(TAG_NAME.exec(h.slice(lt, lt + 64))?.[1]);
    if (!name) {
      this.gather("<");
      return lt + 1;
    }
    this.reading = { name, closing: h[lt + 1] === "/" };
    // Read on after the name, as `dropOn` does: a quote in it (`<a='>`) is the name's, no value.
    return this.tagRest(this.reading, lt + 1 + Number(this.reading.closing) + name.length, until);
  }

  /**
   * The tag read on from `from` to its `>` (quoted attribute values, which may hold `>`,
   * skipped), no further than `until` but for a value; returns where it stopped. At its end
   * (or the file's) it takes effect, and returns where the text after it starts.
   */
  private tagRest(open: Tag, from: number, until: number): number {
    const h = this.html;
    let i = from;
    for (; i < until && i < h.length; i++) {
      const c = h[i];
      if (c === ">") return this.tagDone(open, i + 1);
      if ((c === '"' || c === "'") && opensValue(h, i)) {
        const close = h.indexOf(c, i + 1);
        if (close < 0) return this.tagDone(open, h.length);
        i = close;
      }
    }
    return i >= h.length ? this.tagDone(open, h.length) : i;
  }

  private tagDone(open: Tag, end: number): number {
    this.reading = undefined;
    if (open.inDrop) {
      this.dropTag(open, end);
      return end;
    }
    // HTML ignores a start tag's `/>` but in foreign content: `<script/>` runs on to `</script>`.
    const selfClosing = open.name === "svg" && this.html[end - 2] === "/";
    if (!open.closing && !selfClosing && DROPPED.has(open.name)) {
      this.dropping = new Dropping(open.name);
      return end;
    }
    this.tag(open.name, open.closing);
    if (open.name === "plaintext" && !open.closing) this.plain = true;
    return end;
  }

  /**
   * The dropped element's content skipped up to its end tag (case-insensitive; for a nesting one,
   * the end tag of its own depth), no further than `until`: returns where that end tag starts
   * (the scan reads it as any other tag, and it ends nothing), where a tag in a nesting drop
   * starts (read to its `>` by `tagRest`, then `dropTag`), or the end. Each tag is found by one
   * native search, kept until the scan reaches it.
   */
  private dropOn(d: Dropping, until: number): number {
    const h = this.html;
    for (let from = this.at; ; ) {
      const search = d.raw?.search ?? (d.tags as RegExp);
      if (d.next === undefined || (d.next !== null && d.next.index < from)) {
        search.lastIndex = from;
        d.next = search.exec(h);
      }
      const m = d.next;
      if (m === null) {
        this.dropping = undefined;
        return h.length;
      }
      if (m.index >= until) return until;
      from = m.index + m[0].length;
      if (d.raw) {
        // A script's `<!--`: its dashes may be the start of a `-->` (`<!-->` is opened and closed).
        if (m[0] === "<!--") from = m.index + 2;
        if (!d.raw.ends(m)) continue;
        const name = d.raw.name;
        d.raw = undefined;
        d.next = undefined;
        // Raw text at the top (a script, a style) is the whole drop; in a template its end tag is
        // read as the template's others are, and the template's tags looked for again.
        if (!d.tags) {
          this.dropping = undefined;
          return m.index;
        }
        this.reading = { name, closing: true, inDrop: true };
        return from;
      }
      // A comment in a template or an svg is one: a tag named in it opens and ends nothing.
      if (m[0] === "<!--") {
        from = this.commentEnd(m.index);
        continue;
      }
      const name = asciiLower(m[2]) as string;
      if (m[1] === "/" && name === d.name && d.depth === 1) {
        this.dropping = undefined;
        return m.index;
      }
      // Any other tag is read to its `>` as the page's are, its quoted values skipped (a
      // `</template>` in one ends nothing), then counted (`dropTag`).
      this.reading = { name, closing: m[1] === "/", inDrop: true };
      return from;
    }
  }

  /** A tag read in a nesting drop: one of its name counts its depth; a raw-text one's text is read next. */
  private dropTag(open: Tag, end: number): void {
    const d = this.dropping as Dropping;
    if (open.name === d.name) {
      // An `<svg/>` in an `<svg>` opens nothing (foreign content); a `<template/>` opens one.
      if (open.closing) d.depth--;
      else if (!(d.foreign && this.html[end - 2] === "/")) d.depth++;
    } else if (!open.closing && !d.foreign && RAW_TEXT.has(open.name)) {
      d.raw = new RawText(open.name);
      d.next = undefined;
    }
  }

  private tag(name: string, closing: boolean): void {
    const level = /^h[1-6]$/.test(name) ? Number(name[1]) : undefined;
    if (level === undefined && !BLOCK_TAGS.has(name)) return;
    this.flush();
    if (level !== undefined && !closing) this.heading = level;
  }

  private flush(): void {
    const text = decodeEntities(this.text.join("")).replace(INVISIBLE, "").replace(COLLAPSED, " ").trim();
    this.text = [];
    this.size = 0;
    const level = this.heading;
    this.heading = undefined;
    if (!text) return;
    this.out.push(level === undefined ? { kind: "paragraph", text } : { kind: "heading", level, text });
  }
}

const at = (index: number, none: number) => (index < 0 ? none : index);

/** A name lowered as HTML lowers it, ASCII only (`toLowerCase` makes the Kelvin sign a `k`). */
const asciiLower = (name: string | undefined) => name?.replace(/[A-Z]+/g, (c) => c.toLowerCase());

/**
 * Where to cut gathered text of over `max` characters: after its last white space in the second
 * half of `max`, else at `max` but before a character reference that would straddle it
 * (`&#x10FFFF;` is 10 long, `&divideontimes;` 15, the longest name decoded) and never inside a
 * surrogate pair.
 */
function textCut(text: string, max: number): number {
  const space = afterLastSpace(text, max, max / 2);
  if (space >= 0) return space;
  let cut = max;
  const amp = text.lastIndexOf("&", cut - 1);
  if (amp > cut - 15 && !text.slice(amp, cut).includes(";")) cut = amp;
  return wholeCharCut(text, cut);
}

/**
 * Whether the quote at `i` opens an attribute's value: right after its `=` (white space between),
 * as HTML reads it. One inside an unquoted value (`alt=Bob's`) is a character of it: taken for
 * an opening, it hid the text up to the next such quote. The look back is over white space only,
 * HTML's own (`\s` took a no-break space for it: `alt=\u00a0'x` hid the text up to the next quote).
 */
function opensValue(h: string, i: number): boolean {
  let k = i - 1;
  while (k > 0 && HTML_SPACE.has(h[k] as string)) k--;
  return h[k] === "=";
}

/** Just past the next `token` from `from`, or the end. */
function after(h: string, token: string, from: number): number {
  const found = h.indexOf(token, from);
  return found < 0 ? h.length : found + token.length;
}

/** A tag being read to its `>`; `inDrop`: one inside a nesting drop, which it counts in (`dropTag`). */
type Tag = { name: string; closing: boolean; inDrop?: boolean };

/** A dropped element's skip: its tags that count, and its depth in them. */
class Dropping {
  /**
   * A nesting element's (NESTING): every tag's start (a name past 64 characters is none of
   * ours), and comments. Not only its own name's: a quoted value of any tag may hold one.
   */
  readonly tags: RegExp | undefined;
  depth = 1;
  /** The next tag found (`undefined`: not looked for yet; `null`: none to the end). */
  next: RegExpExecArray | null | undefined;
  /** An `<svg>`'s: its `/>` closes a tag, where HTML's start tags ignore it; its style is no raw text. */
  readonly foreign: boolean;
  /** The raw text being read: the whole of a script or style, or one in a template or object. */
  raw: RawText | undefined;

  constructor(readonly name: string) {
    this.foreign = name === "svg";
    if (NESTING.has(name)) this.tags = new RegExp(`<(/?)([a-zA-Z]${NAME_CHAR}{0,63})|<!--`, "g");
    else this.raw = new RawText(name);
  }
}

/**
 * A raw-text element's content (RAW_TEXT), read to its own end tag. A script's is read as HTML's
 * tokenizer reads script data: after `<!--`, a `<script>` starts "double-escaped" text, whose
 * `</script>` ends no script but the escape, and `-->` goes back to plain script data (WHATWG's
 * script data escaped states). Ended at the first `</script>`, `<script><!--<script>x</script>
 * leak</script>` indexed "leak".
 */
class RawText {
  readonly search: RegExp;
  /** A script's state: 0 script data, 1 escaped (after `<!--`), 2 double-escaped (and a `<script>`). */
  private escape = 0;

  constructor(readonly name: string) {
    // An end tag's name may be followed by `/` too (`</script/>` ends a script, as in browsers).
    this.search =
      name === "script"
        ? new RegExp(`<!--|-->|<(/?)script${NAME_END}`, "gi")
        : new RegExp(`</${name}${NAME_END}`, "gi");
  }

  /** Whether the token found ends the text; a script's moves its state on. */
  ends(m: RegExpExecArray): boolean {
    if (this.name !== "script") return true;
    if (m[0] === "<!--") {
      if (this.escape === 0) this.escape = 1;
      return false;
    }
    if (m[0] === "-->") {
      this.escape = 0;
      return false;
    }
    if (m[1] !== "/") {
      if (this.escape === 1) this.escape = 2;
      return false;
    }
    if (this.escape < 2) return true;
    this.escape = 1;
    return false;
  }
}
