import { describe, expect, test } from "bun:test";
import { waitFor } from "../fixtures/wait.ts";
import { FORMS, perTest, type RunningStandIn } from "./forms.ts";

// llama-server's idle sleep as the stand-in models it, in both forms, against the recordings
// test/fixtures/llama-server/transcripts/85-sleep-idle-chat.txt, 85-sleep-idle.log and
// 86-sleep-props.txt (and 30/30b for /tokenize, the request the supervisor wakes it with).

type Json = Record<string, any>;

const ENTER = [
  "que    start_loop: entering sleeping state",
  "srv  handle_sleep: server is entering sleeping state",
];
const EXIT = [
  "que    start_loop: exiting sleeping state",
  "srv  handle_sleep: server is exiting sleeping state",
];

for (const form of FORMS) {
  describe(`idle sleep of the llama-server stand-in (${form.name})`, () => {
    const { start, call } = perTest(form);
    const props = async (s: RunningStandIn) => (await (await call(s, "/props")).json()) as Json;
    const chat = (s: RunningStandIn) =>
      call(s, "/v1/chat/completions", {
        method: "POST",
        body: JSON.stringify({ messages: [{ role: "user", content: "hi" }], max_tokens: 4 }),
      });
    const asleep = (s: RunningStandIn) =>
      waitFor(() => s.log().includes(ENTER[1] as string), { timeoutMs: 5000 });

    test("idle for --sleep-idle-seconds: the log says so, /props has is_sleeping true and nothing else changed, /health stays 200 (85-sleep-idle.log, 86-sleep-props.txt, 85-sleep-idle-chat.txt)", async () => {
      const s = await start({ sleepIdleS: 1 });
      const awake = await props(s);
      expect(awake.is_sleeping).toBe(false);
      expect(await asleep(s)).toBe(true);
      // Both lines, in the recorded order, with the recorded wording.
      const log = s.log();
      expect(log.indexOf(ENTER[0] as string)).toBeGreaterThan(-1);
      expect(log.indexOf(ENTER[0] as string)).toBeLessThan(log.indexOf(ENTER[1] as string));
      const sleeping = await props(s);
      expect(sleeping.is_sleeping).toBe(true);
      expect({ ...sleeping, is_sleeping: false } as Json).toEqual(awake);
      const health = await fetch(`${s.baseUrl}/health`);
      expect(health.status).toBe(200);
      expect(await health.json()).toEqual({ status: "ok" });
      // /props, /health and /v1/models answer without waking it.
      expect((await call(s, "/v1/models")).status).toBe(200);
      expect((await props(s)).is_sleeping).toBe(true);
      expect(s.log()).not.toContain(EXIT[0]);
    });

    test("the next chat wakes it transparently and takes the reload time; then it is awake (85-sleep-idle-chat.txt, 85-sleep-idle.log)", async () => {
      // A reload long beside a chat to an awake stand-in, even on a loaded machine.
      const s = await start({ sleepIdleS: 1, loadMs: 1000 });
      expect(await asleep(s)).toBe(true);
      const t0 = performance.now();
      const res = await chat(s);
      const took = performance.now() - t0;
      expect(res.status).toBe(200);
      const body = (await res.json()) as Json;
      expect(body.object).toBe("chat.completion");
      expect(body.choices[0].message.role).toBe("assistant");
      expect(took).toBeGreaterThanOrEqual(950);
      // The subprocess's stderr is read as it comes: its last lines may trail the answer.
      expect(await waitFor(() => s.log().includes(EXIT[1] as string))).toBe(true);
      const log = s.log();
      const exiting = log.indexOf(EXIT[0] as string);
      expect(exiting).toBeGreaterThan(log.indexOf(ENTER[1] as string));
      expect(log.indexOf(EXIT[1] as string)).toBeGreaterThan(exiting);
      // The reload is a load: "loading model" again after "exiting sleeping state".
      expect(log.indexOf("load_model: loading model", exiting)).toBeGreaterThan(exiting);
      expect((await props(s)).is_sleeping).toBe(false);
      // A second chat right away reloads nothing: no other "exiting sleeping state" (a reload
      // logs it a second before its chat's answer, so it would be read by then).
      expect((await chat(s)).status).toBe(200);
      expect(s.log().split(EXIT[0] as string).length - 1).toBe(1);
    });

    test("a generation under way keeps it awake; it sleeps once the last one has been idle long enough", async () => {
      const s = await start({
        sleepIdleS: 1,
        script: [{ content: ["a", "b", "c", "d", "e", "f", "g", "h"], chunk_delay_ms: 180 }],
      });
      const res = await call(s, "/v1/chat/completions", {
        method: "POST",
        body: JSON.stringify({ messages: [{ role: "user", content: "go" }], stream: true }),
      });
      await res.text(); // about 1.6 s of streaming, longer than the idle time
      expect(s.log()).not.toContain(ENTER[0]);
      expect((await props(s)).is_sleeping).toBe(false);
      expect(await asleep(s)).toBe(true);
    });

    test("POST /tokenize answers as recorded, and is one of the requests that wake it (transcripts 30, 30b)", async () => {
      const s = await start({ sleepIdleS: 1 });
      const plain = (await (
        await call(s, "/tokenize", { method: "POST", body: JSON.stringify({ content: "Hello world!" }) })
      ).json()) as Json;
      expect(Object.keys(plain)).toEqual(["tokens"]);
      expect(plain.tokens.length).toBeGreaterThan(0);
      for (const t of plain.tokens) expect(typeof t).toBe("number");
      const pieces = (await (
        await call(s, "/tokenize", {
          method: "POST",
          body: JSON.stringify({ content: "Hello world!", with_pieces: true }),
        })
      ).json()) as Json;
      expect(Object.keys(pieces.tokens[0])).toEqual(["id", "piece"]);
      expect(await asleep(s)).toBe(true);
      const empty = await call(s, "/tokenize", { method: "POST", body: '{"content":""}' });
      expect(await empty.json()).toEqual({ tokens: [] });
      expect(await waitFor(() => s.log().includes(EXIT[1] as string))).toBe(true);
      expect((await props(s)).is_sleeping).toBe(false);
    });
  });
}
