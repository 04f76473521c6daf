import { afterEach, expect, spyOn, test } from "bun:test";
import { slotsAnswered } from "../../src/llama/slots.ts";

// GET /slots as the proof that llama-server's loop is past a save (kv-temps.ts `watchLateTemp`).

let restore: (() => void) | undefined;
afterEach(() => restore?.());
const server = { baseUrl: "http://127.0.0.1:9", apiKey: "k" };

function answering(answer: () => Response) {
  const spy = spyOn(globalThis, "fetch").mockImplementation((async () =>
    answer()) as unknown as typeof fetch);
  restore = () => spy.mockRestore();
}

test("an answer of the loop is proof; --no-slots' 501 gives none to wait for; another status is none", async () => {
  answering(() => Response.json([{ id: 0 }]));
  expect(await slotsAnswered(server)).toBe(true);
  restore?.();
  answering(() => new Response("{}", { status: 501 }));
  expect(await slotsAnswered(server)).toBe(true);
  restore?.();
  answering(() => new Response("{}", { status: 503 }));
  expect(await slotsAnswered(server)).toBe(false);
  restore?.();
  answering(() => {
    throw new TypeError("fetch failed");
  });
  expect(await slotsAnswered(server)).toBe(false);
});
