import { CoreError } from "../protocol/errors.ts";

/**
 * A list's `before` cursor: where the last page ended (its row's time and id), opaque to the
 * host, so a page picks up there however many rows were added or deleted since. It names no
 * user: a cursor from another user's listing only sets a point in time in this user's own rows.
 */
export function encodeCursor(at: number, id: string): string {
  return Buffer.from(JSON.stringify([at, id])).toString("base64url");
}

/** The time and id a cursor names; `invalid_request` naming `before` for anything else. */
export function decodeCursor(cursor: string, method: string): [number, string] {
  try {
    const value = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8")) as unknown;
    if (
      Array.isArray(value) &&
      value.length === 2 &&
      Number.isSafeInteger(value[0]) &&
      typeof value[1] === "string"
    )
      return [value[0] as number, value[1] as string];
  } catch {}
  throw new CoreError("invalid_request", `params.before: not a cursor from ${method}'s \`next\``, {
    field: "before",
  });
}

/** Where a first page starts: after every row (ids are ASCII, all below U+10FFFF). */
export const FIRST_PAGE: [number, string] = [Number.MAX_SAFE_INTEGER, "\u{10FFFF}"];
