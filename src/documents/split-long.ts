import { wholeCharCut } from "../util/text-cut.ts";
/**
 * A paragraph longer than a chunk, cut into pieces of at most `max` characters
 * (docs/agent.md "Documents"): after the last sentence end in the piece's second half, else at
 * its last white space there, else (one unbroken word) at `max`, never inside a surrogate pair.
 */
export function splitLong(text: string, max: number): string[] {
  const pieces: string[] = [];
  let rest = text;
  while (rest.length > max) {
    const cut = cutAt(rest, max);
    const piece = rest.slice(0, cut).trim();
    if (piece) pieces.push(piece);
    rest = rest.slice(cut).trimStart();
  }
  if (rest.trim()) pieces.push(rest.trim());
  return pieces;
}

/** A sentence ends at `.`, `!`, `?` (or their CJK forms), closing quotes after, then a space. */
const SENTENCE_END = /[.!?。！？…]["'”’)\]]*\s/g;

function cutAt(text: string, max: number): number {
  const window = text.slice(0, max + 1);
  const half = Math.floor(max / 2);
  let sentence = -1;
  SENTENCE_END.lastIndex = half;
  for (let m = SENTENCE_END.exec(window); m; m = SENTENCE_END.exec(window)) {
    sentence = m.index + m[0].length;
  }
  if (sentence > half && sentence <= max) return sentence;
  const space = lastSpace(window, half);
  if (space > half) return space;
  return wholeCharCut(text, max);
}

function lastSpace(window: string, from: number): number {
  for (let i = window.length - 1; i > from; i--) if (/\s/.test(window[i] as string)) return i;
  return -1;
}
