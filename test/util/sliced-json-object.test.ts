import { describe, expect, spyOn, test } from "bun:test";
import { JsonElementTooLarge, MAX_ELEMENT_BYTES, PIECE_BYTES } from "../../src/util/sliced-json-array.ts";
import { parseJsonObjectSliced } from "../../src/util/sliced-json-object.ts";

const enc = (s: string) => new TextEncoder().encode(s);

/** The value and how many turns it was given, or the error's kind. */
async function run(text: string): Promise<{ value: unknown; turns: number } | string> {
  let turns = 0;
  try {
    const value = await parseJsonObjectSliced(enc(text), async () => {
      turns++;
    });
    return { value, turns };
  } catch (err) {
    return (err as Error).name;
  }
}

/** What JSON.parse makes of `text` (a BOM dropped, as the UTF-8 decoding of the body does), or "SyntaxError". */
function parsed(text: string): unknown {
  try {
    return JSON.parse(text.replace(/^\uFEFF/, ""));
  } catch (err) {
    return (err as Error).name;
  }
}

const big = (n: number) => Array.from({ length: n }, (_, i) => ({ rfilename: `d/f",[]{}\\${i}.gguf` }));

describe("parseJsonObjectSliced", () => {
  test("a big object comes in several pieces, the loop given back between them, equal to one parse", async () => {
    const whole = {
      sha: "c".repeat(40),
      tags: ["a,b", "[x]"],
      siblings: big((3 * PIECE_BYTES) / 30),
      pad: "y".repeat(PIECE_BYTES / 2),
      ...Object.fromEntries(Array.from({ length: 3000 }, (_, i) => [`k${i}`, { v: [i, `${i}}`] }])),
      last: null,
    };
    const text = ` \n${JSON.stringify(whole, null, 1)} `;
    let immediates = 0;
    let seenBetween = 0;
    const ticking = setInterval(() => immediates++, 0);
    const value = await parseJsonObjectSliced(enc(text), async () => {
      await new Promise((r) => setImmediate(r));
      seenBetween = Math.max(seenBetween, immediates);
    });
    clearInterval(ticking);
    expect(value).toEqual(whole);
    expect(Object.keys(value as object)).toEqual(Object.keys(whole));
    expect(seenBetween).toBeGreaterThan(1);
  });

  test("what one JSON.parse accepts, it gives alike; what it refuses, it refuses", async () => {
    // Past a piece, in few members and elements (a KiB each), so the comparison is quick.
    const kib = `"${"v".repeat(1024)}"`;
    const many = (n: number) => Array.from({ length: n }, (_, i) => `"k${i % 7}":[${i},${kib}]`).join(",");
    const arr = `[${`${kib},`.repeat(300)}2]`;
    const good = [
      "{}",
      " { } ",
      '{"a":1}',
      '{"a":1,"b":[1,2],"a":3}',
      `{${many(300)}}`,
      `{"x":${arr},"x":0}`,
      `{"x":0,"x":${arr}}`,
      `{"x":${arr} , "y" : ${arr} }`,
      '{"__proto__":{"p":1},"constructor":2}',
      '{"b":1,"2":2,"1":3}',
      '\uFEFF{"a":[]}',
      "null",
      "[1]",
      '"s"',
      '\uFEFF"s"',
    ];
    for (const text of good) {
      const got = await run(text);
      expect(typeof got === "string" ? got : got.value).toEqual(parsed(text));
      if (typeof got === "string") continue;
      expect(Object.keys(got.value ?? {})).toEqual(Object.keys(parsed(text) ?? {}));
      // The large ones came in pieces.
      expect(got.turns > 0).toBe(text.length > PIECE_BYTES);
    }
    // A large value that is not an object is refused unparsed (the revision answer is one).
    expect(await run(`[${"1,".repeat(PIECE_BYTES)}2]`)).toBe("SyntaxError");
    const proto = await run('{"__proto__":{"p":1}}');
    expect(Object.getPrototypeOf((proto as { value: object }).value)).toBe(Object.prototype);
    const bad = [
      "{",
      "{,}",
      '{"a":1,}',
      '{"a":1,,"b":2}',
      '{"a"}',
      '{"a":}',
      '{"a" 1}',
      "{a:1}",
      '{"a":1}}',
      '{"a":1} x',
      '{"a":[1}',
      '{"a":{1]}',
      '{"a":"x',
      `{${many(300)},}`,
      `{${many(300)}, ,"z":1}`,
      `{${many(300)} "z":1}`,
      `{"x":${arr},}`,
      `{"x":${arr} "y":1}`,
      `{"x":${arr}x"y":1}`,
      `{"x":${arr}]`,
      `{"x":${arr}`,
      `{ , "x":${arr}}`,
      `{"x" ${arr}}`,
      `{"x":1,,"y":${arr}}`,
      // A big array after some other value: read as if that value's first byte were a `[`.
      `{"x":1 ${arr}, 2]}`,
      `{"x":"s" ${arr},"t"]}`,
      `{"x":[${`${kib},`.repeat(300)}]}`,
      "<html>",
      "",
      // A BOM is the body's first bytes or nothing: inside, as a piece's first, it is no space.
      '{\uFEFF"a":1}',
      '{"a":\uFEFF1}',
      '\uFEFF\uFEFF{"a":1}',
    ];
    for (const text of bad) {
      expect(parsed(text)).toBe("SyntaxError");
      expect(await run(text)).toBe("SyntaxError");
    }
  });

  test("a member or an array's element past the bound is refused as too large", async () => {
    // A hostile mirror's answer of one 64 MiB member (a string, or an object) would be one
    // stretch of cutting and parsing; an element of a big array is bound as a listing's entry.
    const long = "x".repeat(MAX_ELEMENT_BYTES + 1);
    for (const text of [
      `{"a":"${long}"}`,
      `{"a":{"b":[${"0,".repeat(MAX_ELEMENT_BYTES)}0]}}`,
      `{"siblings":[1,"${long}"]}`,
    ]) {
      const err = await parseJsonObjectSliced(enc(text), async () => {}).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(JsonElementTooLarge);
    }
    const fits = `{"a":"${"x".repeat(MAX_ELEMENT_BYTES - 16)}"}`;
    expect(((await run(fits)) as { value: unknown }).value).toEqual(JSON.parse(fits));
  });
});

// A hub answer for a revision of millions of tiny distinct keys grew one object past a rehash
// that held the loop ~235 ms in one member's merge (measured 2026-12, this box), where the core
// reads `sha` only (models/hub-client.ts): only the kept members are put in it, counted here.
test("with `keep`, only those members are put in the object, the rest still parsed", async () => {
  const members = Array.from({ length: 40_000 }, (_, i) => `"k${i}":${i}`);
  const text = `{${members.join(",")},"sha":"${"a".repeat(40)}","siblings":[1,2]}`;
  let turns = 0;
  const value = await parseJsonObjectSliced(enc(text), async () => void turns++, new Set(["sha"]));
  expect(Object.keys(value as object)).toEqual(["sha"]);
  expect(turns).toBeGreaterThan(1);
  // Still checked whole: a broken member after the kept one is refused.
  const broken = parseJsonObjectSliced(
    enc(`{"sha":"x",${members.slice(0, 10).join(",")},"z":}`),
    async () => {},
    new Set(["sha"]),
  );
  await expect(broken).rejects.toThrow(SyntaxError);
});

// The revision answer's `siblings` (every file of the repo, tens of MiB) is not kept, yet each of
// its elements was gathered into an array until the member ended, then dropped: the whole answer
// held in memory as objects for nothing. An unkept big array's elements are parsed, not gathered.
test("with `keep`, an unkept big array's elements are never gathered", async () => {
  const siblings = Array.from({ length: 20_000 }, (_, i) => `{"rfilename":"marker-${i}.gguf"}`);
  const text = `{"sha":"${"a".repeat(40)}","siblings":[${siblings.join(",")}]}`;
  let gathered = 0;
  const push = Array.prototype.push;
  const spy = spyOn(Array.prototype, "push").mockImplementation(function (
    this: unknown[],
    ...items: unknown[]
  ) {
    for (const item of items)
      if (String((item as { rfilename?: unknown } | null)?.rfilename ?? "").startsWith("marker-")) gathered++;
    return push.apply(this, items);
  });
  let value: unknown;
  try {
    value = await parseJsonObjectSliced(enc(text), async () => {}, new Set(["sha"]));
  } finally {
    spy.mockRestore();
  }
  expect(Object.keys(value as object)).toEqual(["sha"]);
  expect(gathered).toBe(0);
});
