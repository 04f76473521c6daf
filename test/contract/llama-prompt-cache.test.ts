import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { FORMS, type RunningStandIn } from "./forms.ts";
import { RECORDINGS } from "./recordings.ts";

// The stand-in's prompt cache against what llama-server did (transcripts 92–94b): the counters
// `timings.cache_n`/`prompt_n` come from the prefix a slot holds, a slot is saved to a file and
// restored by another process, the RAM cache brings back a conversation another one displaced, and
// the slot actions fail as recorded. The stand-in's tokens are its own, so the recorded counts are
// matched in what they say (all reused, none, the new tokens only), not in number.

type Json = Record<string, any>;
const body = (name: string) => readFileSync(join(RECORDINGS, "bodies", name), "utf8");

async function post(s: RunningStandIn, path: string, text?: string): Promise<{ status: number; json: Json }> {
  const res = await fetch(`${s.baseUrl}${path}`, {
    method: "POST",
    headers: { Authorization: `Bearer ${s.apiKey}`, "Content-Type": "application/json" },
    ...(text !== undefined ? { body: text } : {}),
  });
  return { status: res.status, json: (await res.json()) as Json };
}

async function chat(s: RunningStandIn, file: string): Promise<Json> {
  const { status, json } = await post(s, "/v1/chat/completions", body(file));
  expect(status).toBe(200);
  return json.timings;
}

describe("the stand-in's prompt cache and slot files (transcripts 92–94b)", () => {
  for (const form of FORMS) {
    describe(form.name, () => {
      test("92, 92b: turn 2 with the same prefix processes the new tokens only; a changed system message, nearly all", async () => {
        const s = await form.start({ slots: 1 });
        try {
          const t1 = await chat(s, "turn1.json");
          expect(t1.cache_n).toBe(0);
          const t2 = await chat(s, "turn2.json");
          // 92: cache_n 34 = turn 1's whole prompt, prompt_n 20 = what turn 2 added.
          expect(t2.cache_n).toBe(t1.prompt_n);
          expect(t2.prompt_n).toBeLessThan(t2.cache_n);
          const changed = await chat(s, "turn2-system-changed.json");
          // 92b: cache_n 9 of 64, the template's first tokens.
          expect(changed.cache_n).toBeLessThan((changed.cache_n + changed.prompt_n) / 5);
        } finally {
          await s.stop();
        }
      });

      test("93: a slot saved, restored by a new process, and the next turn reuses it", async () => {
        using dir = tmpdir();
        const first = await form.start({ slots: 1, slotDir: dir.path });
        let saved: Json;
        try {
          const t1 = await chat(first, "turn1.json");
          const save = await post(first, "/slots/0?action=save", body("slot-save.json"));
          expect(save.status).toBe(200);
          saved = save.json;
          expect(Object.keys(saved).sort()).toEqual([
            "filename",
            "id_slot",
            "n_saved",
            "n_written",
            "timings",
          ]);
          expect(saved).toMatchObject({ id_slot: 0, filename: "sess-a.bin" });
          expect(saved.n_saved).toBeGreaterThan(t1.prompt_n);
          expect(typeof saved.timings.save_ms).toBe("number");
        } finally {
          await first.stop();
        }
        const second = await form.start({ slots: 1, slotDir: dir.path });
        try {
          const restore = await post(second, "/slots/0?action=restore", body("slot-save.json"));
          expect(restore.status).toBe(200);
          expect(restore.json).toMatchObject({
            id_slot: 0,
            filename: "sess-a.bin",
            n_restored: saved.n_saved,
          });
          expect(restore.json.n_read).toBe(saved.n_written);
          const t2 = await chat(second, "turn2.json");
          expect(t2.cache_n).toBeGreaterThan(t2.prompt_n);
          const slots = await fetch(`${second.baseUrl}/slots`, {
            headers: { Authorization: `Bearer ${second.apiKey}` },
          });
          expect(((await slots.json()) as Json[])[0]).toMatchObject({ id: 0, is_processing: false });
        } finally {
          await second.stop();
        }
      });

      test("93b, 93e: the recorded errors of slot actions", async () => {
        using dir = tmpdir();
        const s = await form.start({ slots: 1, slotDir: dir.path });
        try {
          await chat(s, "turn1.json");
          const missing = await post(s, "/slots/0?action=restore", body("slot-missing.json"));
          expect(missing.status).toBe(400);
          expect(missing.json.error).toEqual({
            code: 400,
            message: "Unable to restore slot: No available space in KV cache or invalid slot save file",
            type: "invalid_request_error",
          });
          // ... and the slot was cleared: the next turn reuses nothing of turn 1.
          expect((await chat(s, "turn2.json")).cache_n).toBe(0);
          const badName = await post(s, "/slots/0?action=save", body("slot-save-bad-name.json"));
          expect([badName.status, badName.json.error.message]).toEqual([400, "Invalid filename"]);
          const noName = await post(s, "/slots/0?action=save", body("empty-object.json"));
          expect(noName.status).toBe(500);
          expect(noName.json.error.type).toBe("server_error");
          const outOfRange = await post(s, "/slots/5?action=save", body("slot-save-other.json"));
          expect(outOfRange.status).toBe(200);
          expect(outOfRange.json).toMatchObject({ id_slot: 5, n_saved: 0 });
          const erase = await post(s, "/slots/0?action=erase");
          expect(erase.json).toMatchObject({ id_slot: 0 });
        } finally {
          await s.stop();
        }
        const none = await form.start({ slots: 1 });
        try {
          const r = await post(none, "/slots/0?action=save", body("slot-save.json"));
          expect(r.status).toBe(501);
          expect(r.json.error.type).toBe("not_supported_error");
        } finally {
          await none.stop();
        }
      });

      /** A saved slot file changed by `change`, then restored: the answer, or none (the server died). */
      async function restoreChanged(change: (bytes: Buffer) => Buffer): Promise<{ status: number } | null> {
        using dir = tmpdir();
        const s = await form.start({ slots: 1, slotDir: dir.path });
        try {
          await chat(s, "turn1.json");
          await post(s, "/slots/0?action=save", body("slot-save.json"));
          const file = join(dir.path, "sess-a.bin");
          await Bun.write(file, change(readFileSync(file)));
          return await post(s, "/slots/0?action=restore", body("slot-save.json")).catch(() => null);
        } finally {
          await s.stop();
        }
      }

      test("93c: a cut-short file is refused like another shape's, and clears the slot", async () => {
        const r = await restoreChanged((bytes) => bytes.subarray(0, Math.floor(bytes.length / 2)));
        expect(r?.status).toBe(400);
      });

      test("93f: a file claiming more cells than a slot holds gets no answer: the server dies restoring it", async () => {
        // 93f set the high bit of the real file's cell count.
        const r = await restoreChanged((bytes) =>
          Buffer.from(
            bytes.toString("utf8").replace(/"cells":(\d+)/, (_, n) => `"cells":${2 ** 31 + Number(n)}`),
          ),
        );
        expect(r).toBeNull();
      });

      test("94, 94b: the RAM cache brings back a conversation another took the slot from; --cache-ram 0 does not", async () => {
        for (const [cacheRamMib, reused] of [
          [undefined, true],
          [0, false],
        ] as const) {
          const s = await form.start({ slots: 1, ...(cacheRamMib !== undefined ? { cacheRamMib } : {}) });
          try {
            const a1 = await chat(s, "turn1.json");
            await chat(s, "convB.json");
            const a2 = await chat(s, "turn2.json");
            if (reused) expect(a2.cache_n).toBe(a1.prompt_n);
            else expect(a2.cache_n).toBeLessThan(a1.prompt_n / 4);
          } finally {
            await s.stop();
          }
        }
      });
    });
  }
});
