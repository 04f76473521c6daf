import { describe, expect, test } from "bun:test";
import { stopLeft } from "../../src/cli/pull.ts";
import { CoreError } from "../../src/protocol/errors.ts";

// What `pull` says a stop left (docs/models.md "Cancel"): a partial to resume, or nothing yet.
describe("stopLeft", () => {
  const at = (bytes_done?: number) =>
    new CoreError("cancelled", "stopped", bytes_done === undefined ? undefined : { bytes_done, total: 10 });
  const KEPT = "; the partial download is kept, pull again to resume";
  const NONE = " before its download began";
  const left = (
    part: number,
    err: CoreError,
    phase?: "wait" | "download" | "check",
    earlierPartial = false,
  ) => stopLeft({ part, phase, earlierPartial }, err, "pull again");

  test("nothing before any progress, or with a first part's body not begun", () => {
    expect(left(0, at())).toBe(NONE);
    expect(left(1, at(0), "download")).toBe(NONE);
  });

  test("a first part with bytes, or stopped outside its body (checking)", () => {
    expect(left(1, at(5), "download")).toBe(KEPT);
    expect(left(1, at(), "check")).toBe(KEPT);
  });

  test("a whole first part, the next file's storage still asked (its bytes 0, no event of its own): kept", () => {
    expect(
      stopLeft({ part: 1, phase: "download", whole: true, earlierPartial: false }, at(0), "pull again"),
    ).toBe(KEPT);
  });

  // Cancelled while the verified file was flushed (download.ts): renamed into place, whole, only
  // the snapshot entry left to make. It said "the partial download is kept … to resume".
  test("a file stopped once verified and in place is called downloaded, not partial", () => {
    const whole = new CoreError("cancelled", "stopped", { bytes_done: 10, total: 10 });
    const said = stopLeft(
      { part: 1, phase: "download", whole: true, earlierPartial: false },
      whole,
      "pull again",
    );
    expect(said).toBe("; the downloaded file is kept, pull again to finish");
    expect(left(2, whole, "download")).toBe("; the downloaded file is kept, pull again to finish");
  });

  test("a later part stopped before its first byte: the parts before it are whole, not 'before its download began'", () => {
    expect(left(2, at(0), "download")).toBe(KEPT);
    expect(left(2, at(), "wait")).toBe(KEPT);
  });

  // Before: "the partial download is kept", though the partial on disk was the other pull's.
  test("a first part stopped waiting on another pull's lock claims no partial of its own", () => {
    const said = left(1, at(), "wait");
    expect(said).not.toContain("kept");
    expect(said).toContain("another pull");
  });

  // Before: "before its download began", though an earlier run's bytes are still there.
  test("a resumed pull stopped before its first event says the earlier run's partial is still there", () => {
    // Stopped while the storage was asked for the rest: the core's error gives the partial's size.
    expect(left(0, at(4))).toBe("; the partial download an earlier run left is kept, pull again to resume");
    // Stopped while the hub's API was asked: which file is not known yet, only that one is there.
    const said = left(0, at(), undefined, true);
    expect(said).toStartWith(NONE);
    expect(said).toContain("a partial download an earlier pull of this repo left is kept");
  });
});
