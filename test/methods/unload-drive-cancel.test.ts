import { afterEach, describe, expect, spyOn, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { drives } from "../../src/util/drive-answers.ts";
import { startHarness } from "../fixtures/stdio-harness.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// `models.unload` of a path asks its drive off the loop first (config/choose-model.ts
// answeringFiles); with no signal given, neither a `cancel` nor the core's stop ended that wait:
// a dead mount held the request, and the core's exit, for the drive's 30 s.
afterEach(() => (drives.answers as unknown as { mockRestore?: () => void }).mockRestore?.());

const far = "/mnt/offline/model.gguf";

/** A core whose config has a models entry, and a drive under `far` whose stat never answers. */
function coreWithDeadDrive(dir: string) {
  writeFileSync(join(dir, "config.yaml"), "models:\n  - {name: e, kind: embedding, path: ./e.gguf}\n");
  let asked!: () => void;
  const waiting = new Promise<void>((r) => {
    asked = r;
  });
  spyOn(drives, "answers").mockImplementation((path: string) => {
    if (path !== far) return Promise.resolve(true);
    asked();
    return new Promise<boolean>(() => {});
  });
  return { h: startHarness({ cwd: dir }), waiting };
}

describe("models.unload while its path's drive does not answer", () => {
  test("a cancel by its id answers at once and the unload ends cancelled", async () => {
    using dir = tmpdir();
    const { h, waiting } = coreWithDeadDrive(dir.path);
    h.send({ id: "u", method: "models.unload", params: { model: far } });
    await waiting;
    expect(await h.request({ id: "c", method: "cancel", params: { request_id: "u" } })).toMatchObject({
      result: { cancelled: true },
    });
    await h.waitFor(() => h.terminal("u") !== undefined);
    expect(h.terminal("u")).toMatchObject({ type: "error", code: "cancelled" });
    h.end();
    expect(await h.exit).toBe(0);
  });

  test("a cancel without an id is still the chat's: an unload is cancelled by its id only", async () => {
    using dir = tmpdir();
    const { h, waiting } = coreWithDeadDrive(dir.path);
    h.send({ id: "u", method: "models.unload", params: { model: far } });
    await waiting;
    expect(await h.request({ id: "c", method: "cancel" })).toMatchObject({ result: { cancelled: false } });
    // By its id then: left to the stop, a dead drive's wait ends only at the stop's 2 s grace.
    await h.request({ id: "c2", method: "cancel", params: { request_id: "u" } });
    h.end();
    expect(await h.exit).toBe(0);
    expect(h.terminal("u")).toMatchObject({ type: "error", code: "cancelled" });
  });

  test("the core's shutdown ends it at its grace (2 s at most): cancelled, the core exits", async () => {
    using dir = tmpdir();
    const { h, waiting } = coreWithDeadDrive(dir.path);
    h.send({ id: "u", method: "models.unload", params: { model: far } });
    await waiting;
    h.send({ id: "bye", method: "shutdown" });
    await h.waitFor(() => h.terminal("bye") !== undefined);
    expect(await h.exit).toBe(0);
    expect(h.terminal("u")).toMatchObject({ code: "cancelled", message: "the core is shutting down" });
  });

  test("an unload by name read with the shutdown (a script's last lines) is answered with its result", async () => {
    // The stop aborted every undecided unload: one by name, still loading its method's module or
    // a microtask from deciding, ended `cancelled` though it asks no drive (the compiled core's
    // e2e "shutdown right behind a models.unload" got `cancelled`, not `unloaded: true`).
    using dir = tmpdir();
    const { h } = coreWithDeadDrive(dir.path);
    const line = (m: object) => `${JSON.stringify(m)}\n`;
    h.sendRaw(
      line({ id: "u", method: "models.unload", params: { model: "e" } }) +
        line({ id: "bye", method: "shutdown" }),
    );
    expect(await h.exit).toBe(0);
    expect(h.terminal("u")).toEqual({ id: "u", type: "result", result: { model: "e", unloaded: false } });
    // Its module loaded now: decided a microtask after its line, the shutdown's in the same read.
    const again = coreWithDeadDrive(dir.path).h;
    again.sendRaw(
      line({ id: "u", method: "models.unload", params: { model: "e" } }) +
        line({ id: "bye", method: "shutdown" }),
    );
    expect(await again.exit).toBe(0);
    expect(again.terminal("u")).toMatchObject({ type: "result", result: { unloaded: false } });
  });

  test("an unload by path on a drive that answers, read with the shutdown, is answered with its result", async () => {
    // The stop aborted `stopping` as soon as the requests it waits for had answered (none here):
    // the unload's stat of a live local drive, a millisecond away, ended `cancelled` at once, where
    // the same script's unload by name is answered (docs/protocol.md, Lifecycle: a request piped
    // with its EOF is answered as it would have been).
    using dir = tmpdir();
    const { h } = coreWithDeadDrive(dir.path);
    const line = (m: object) => `${JSON.stringify(m)}\n`;
    h.sendRaw(
      line({ id: "u", method: "models.unload", params: { model: join(dir.path, "e.gguf") } }) +
        line({ id: "bye", method: "shutdown" }),
    );
    expect(await h.exit).toBe(0);
    expect(h.terminal("u")).toMatchObject({ type: "result", result: { unloaded: false } });
  });
});
