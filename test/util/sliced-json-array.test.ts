import { describe, expect, test } from "bun:test";
import {
  eachJsonArrayPiece,
  JsonElementTooLarge,
  MAX_ELEMENT_BYTES,
  PIECE_BYTES,
} from "../../src/util/sliced-json-array.ts";

const enc = (s: string) => new TextEncoder().encode(s);

/** The elements and how many pieces they came in, or the error's kind. */
async function run(
  text: string,
): Promise<{ elements: unknown[]; pieces: number; isArray: boolean } | string> {
  const elements: unknown[] = [];
  let pieces = 0;
  try {
    const isArray = await eachJsonArrayPiece(enc(text), async (e) => {
      pieces++;
      elements.push(...e);
    });
    return { elements, pieces, isArray };
  } catch (err) {
    return (err as Error).name;
  }
}

describe("eachJsonArrayPiece", () => {
  test("a big array comes in several pieces, with the loop given back between them, equal to one parse", async () => {
    const entry = (i: number) => ({
      type: "file",
      path: `d/f",[]{}\\${i}.gguf`,
      lfs: { oid: "a".repeat(64), size: i },
    });
    const whole = Array.from({ length: (3 * PIECE_BYTES) / 100 }, (_, i) => entry(i));
    const elements: unknown[] = [];
    let immediates = 0;
    let seenBetween = 0;
    const ticking = setInterval(() => immediates++, 0);
    await eachJsonArrayPiece(enc(` \n${JSON.stringify(whole)} `), async (e) => {
      elements.push(...e);
      await new Promise((r) => setImmediate(r));
      seenBetween = Math.max(seenBetween, immediates);
    });
    clearInterval(ticking);
    expect(elements).toEqual(whole);
    expect(seenBetween).toBeGreaterThan(1);
  });

  test("what one JSON.parse accepts, it accepts alike; what it refuses, it refuses", async () => {
    const big = "1,".repeat(PIECE_BYTES);
    for (const text of ["[]", " [ ] ", "[1]", `[${big}2]`, '["a,b",{"c":[1,2]}]', "\uFEFF[1,2]"]) {
      const got = await run(text);
      expect(typeof got === "string" ? got : got.elements).toEqual(JSON.parse(text.replace("\uFEFF", "")));
    }
    for (const text of [
      "[",
      "[1,]",
      `[${big}]`,
      `[${big},2]`,
      "[1}",
      `[${big}2},3]`,
      "[1] x",
      "[1,,2]",
      '["a]',
      `[${big}"x`,
      // A BOM inside, even as a piece's first character, is no space (one parse refuses it).
      "[\uFEFF1]",
      `[${big}\uFEFF2]`,
    ])
      expect(await run(text)).toBe("SyntaxError");
  });

  test("another JSON value is told apart, and a big one is refused unparsed", async () => {
    expect(await run('{"a":1}')).toEqual({ elements: [], pieces: 0, isArray: false });
    expect(await run(`{"a":"${"x".repeat(PIECE_BYTES)}"}`)).toBe("SyntaxError");
    expect(await run("<html>")).toBe("SyntaxError");
  });
});

describe("one huge element", () => {
  test("is refused as too large, not scanned and parsed whole in one turn of the loop", async () => {
    // A hostile mirror's page of one 64 MiB entry ({"a":[0,0,…]}) was one piece: ~2 s of
    // cutting and parsing in one turn, ping and cancel unanswered (measured on the dev box).
    const nested = `[{"a":[${"0,".repeat(MAX_ELEMENT_BYTES)}0]}]`;
    const long = `[1,"${"x".repeat(MAX_ELEMENT_BYTES + 1)}",2]`;
    for (const text of [nested, long]) {
      const pieces: unknown[][] = [];
      const err = await eachJsonArrayPiece(enc(text), async (e) => {
        pieces.push(e);
      }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(JsonElementTooLarge);
      expect(err).toBeInstanceOf(SyntaxError);
    }
    // An element just under the bound is taken whole.
    const fits = `[{"a":"${"x".repeat(MAX_ELEMENT_BYTES - 16)}"}]`;
    const got = await run(fits);
    expect(typeof got === "string" ? got : got.elements).toEqual(JSON.parse(fits));
  });
});
