import { describe, expect, test } from "bun:test";
import { heldWhile } from "../../src/util/held-while.ts";

describe("heldWhile", () => {
  test("the release waits for every piece tracked before it", async () => {
    let released = 0;
    const held = heldWhile(() => released++);
    const piece = Promise.withResolvers<void>();
    held.track(piece.promise);
    held.release();
    expect(released).toBe(0);
    piece.resolve();
    await piece.promise;
    await Promise.resolve();
    expect(released).toBe(1);
  });

  test("a piece tracked after the release, or a second release, never releases the room again", async () => {
    let released = 0;
    const held = heldWhile(() => released++);
    held.release();
    expect(released).toBe(1);
    const late = Promise.withResolvers<void>();
    const failed = Promise.withResolvers<void>();
    held.track(late.promise);
    held.track(failed.promise).catch(() => {});
    late.resolve();
    failed.reject(new Error("read failed"));
    await Promise.allSettled([late.promise, failed.promise]);
    await Promise.resolve();
    held.release();
    expect(released).toBe(1);
  });
});
