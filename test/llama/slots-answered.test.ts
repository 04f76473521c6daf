import { afterEach, expect, spyOn, test } from "bun:test";
import { SLOTS_ANSWER, slotsAnswered } from "../../src/llama/slots.ts";
import { LlamaStandIn } from "../fixtures/llama-stand-in/in-process.ts";

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

// A wedged server (all its HTTP threads busy, its loop stuck) left GET /slots unanswered until
// its exit, a late save's file waiting that long to be removed (kv-temps.ts `watchLateTemp`).
// It has a deadline: "not answered" only costs a look again later.
test("a /slots that never answers is no proof past its own deadline; the next look is asked again", async () => {
  const standIn = new LlamaStandIn();
  const deadline = SLOTS_ANSWER.ms;
  SLOTS_ANSWER.ms = 50;
  try {
    standIn.model.slotsWedges = 1;
    const endpoint = { baseUrl: standIn.baseUrl, apiKey: standIn.apiKey };
    expect(await slotsAnswered(endpoint, new AbortController().signal)).toBe(false);
    expect(await slotsAnswered(endpoint)).toBe(true);
  } finally {
    SLOTS_ANSWER.ms = deadline;
    standIn.stop();
  }
}, 2000);
