import { describe, expect, test } from "bun:test";
import { LlmError, SlotError } from "../../src/llama/errors.ts";
import { restoreSlot, saveSlot } from "../../src/llama/slots.ts";
import { RECORDINGS } from "../contract/recordings.ts";
import { readExchanges, readTranscript } from "../contract/transcript.ts";
import { tape } from "./tape.ts";

// Slots as recorded: save and restore across processes (93), their failures (93b, 93c, 93e). Each answer is played back verbatim; the requests the client makes
// are compared with the recorded ones.

const failure = async (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (e: unknown) => e,
  );

describe("slots against the recordings", () => {
  test("93-slot-save-restore.txt: save, then restore in a new process, each answer typed; the requests are the recorded ones", async () => {
    const [save, , restore] = readExchanges(RECORDINGS, "93-slot-save-restore.txt");
    using t = tape(save!, restore!);
    const saved = await saveSlot(t, 0, "sess-a.bin");
    expect(saved).toEqual({
      id_slot: 0,
      filename: "sess-a.bin",
      n_saved: 41,
      n_written: 11244,
      timings: { save_ms: 0.294 },
    });
    const restored = await restoreSlot(t, 0, "sess-a.bin");
    expect(restored).toMatchObject({ id_slot: 0, n_restored: 41, n_read: 11244 });
    expect(t.asked[0]).toMatchObject({
      method: "POST",
      path: `/slots/0${save!.query}`,
      contentType: "application/json",
    });
    expect(JSON.parse(t.asked[0]!.body)).toEqual(JSON.parse(save!.requestBody));
    expect(t.asked[1]?.path).toBe(`/slots/0${restore!.query}`);
  });

  test("93b-slot-errors.txt: a missing file is restore_failed, a path in the name invalid_filename, no name a 500 that is the request's fault; slot 5 of 1 saves 0 tokens", async () => {
    const [missing, badName, noName, pastCount] = readExchanges(RECORDINGS, "93b-slot-errors.txt");
    using t = tape(missing!, badName!, noName!, pastCount!);
    const lost = await failure(restoreSlot(t, 0, "nope.bin"));
    expect(lost).toBeInstanceOf(SlotError);
    expect(lost).toMatchObject({ kind: "restore_failed", slot: 0 });
    expect((lost as SlotError).message).toContain("Unable to restore slot");
    expect(await failure(saveSlot(t, 0, "../x.bin"))).toMatchObject({ kind: "invalid_filename" });
    const unnamed = await failure(saveSlot(t, 0, ""));
    expect(unnamed).toBeInstanceOf(LlmError);
    expect(unnamed).toMatchObject({ kind: "bad_response", status: 500 });
    expect(await saveSlot(t, 5, "other.bin")).toMatchObject({ id_slot: 5, n_saved: 0 });
  });

  test("93c-slot-restore-other-model.txt: another model's file is restore_failed; 93d-slot-restore-same-shape-model.txt: a same-shape model's is restored", async () => {
    using other = tape(readTranscript(RECORDINGS, "93c-slot-restore-other-model.txt"));
    expect(await failure(restoreSlot(other, 0, "sess-a.bin"))).toMatchObject({ kind: "restore_failed" });
    using same = tape(readTranscript(RECORDINGS, "93d-slot-restore-same-shape-model.txt"));
    expect(await restoreSlot(same, 0, "sess-a.bin")).toMatchObject({ n_restored: 41 });
  });

  test("93e-slot-no-save-path.txt: without --slot-save-path, not_supported", async () => {
    using t = tape(readTranscript(RECORDINGS, "93e-slot-no-save-path.txt"));
    const err = await failure(saveSlot(t, 0, "sess-a.bin"));
    expect(err).toBeInstanceOf(SlotError);
    expect(err).toMatchObject({ kind: "not_supported" });
  });
});

describe("a slot answer of another shape", () => {
  test("is bad_response naming the route", async () => {
    using t = tape({ status: 200, headers: {}, body: '{"id_slot":0}' });
    const err = await failure(restoreSlot(t, 0, "sess-a.bin"));
    expect(err).toMatchObject({ kind: "bad_response" });
    expect((err as LlmError).message).toContain("/slots/0?action=restore");
  });
});
