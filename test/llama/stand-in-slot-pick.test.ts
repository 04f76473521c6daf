import { afterEach, describe, expect, test } from "bun:test";
import { LlamaStandIn } from "../fixtures/llama-stand-in/in-process.ts";

// The stand-in against llama-server's source (b10587 server-context.cpp): the RAM prompt cache is
// updated as a slot is picked for a task (`get_available_slot`), before the task is refused at
// sampler set-up (`launch_slot_with_task`: a grammar it cannot parse, 95f) or for a prompt past
// the context (`update_slots`, 22): a refused request has already copied the slot's prompt there.

let standIn: LlamaStandIn | undefined;
afterEach(() => {
  standIn?.stop();
  standIn = undefined;
});

const WORDS = "my code word is ORYX-5521";

async function post(s: LlamaStandIn, path: string, body: unknown): Promise<number> {
  const res = await fetch(`${s.baseUrl}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${s.apiKey}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  await res.text();
  return res.status;
}

/** The slot holds `WORDS`' prompt, nothing in the RAM cache yet. */
async function held(): Promise<LlamaStandIn> {
  const s = new LlamaStandIn({ slots: 1 });
  standIn = s;
  s.script({ content: "noted" });
  expect(
    await post(s, "/v1/chat/completions", { messages: [{ role: "user", content: WORDS }], id_slot: 0 }),
  ).toBe(200);
  expect(s.model.kv.ram).toEqual([]);
  return s;
}

const inRam = (s: LlamaStandIn) => s.model.kv.ram.some((t) => t.join("").includes("ORYX-5521"));
const inSlot = (s: LlamaStandIn) => s.model.kv.slots[0]?.tokens.join("").includes("ORYX-5521");

describe("a request refused after its slot was picked", () => {
  test("too long for the context: the slot's prompt copied into the RAM cache, the slot's tokens not cut", async () => {
    const s = await held();
    s.script({ overflow: true });
    const other = { messages: [{ role: "user", content: "something else entirely" }], id_slot: 0 };
    expect(await post(s, "/v1/chat/completions", other)).toBe(400);
    expect(inRam(s)).toBe(true);
    expect(inSlot(s)).toBe(true);
  });

  test("a grammar the sampler cannot parse, in a chat or a probe: the same", async () => {
    const s = await held();
    const parameters = { type: "object", properties: { x: { type: "string", minLength: 2500 } } };
    const tools = [{ type: "function", function: { name: "t", parameters } }];
    const chat = { messages: [{ role: "user", content: "something else entirely" }], tools, id_slot: 0 };
    expect(await post(s, "/v1/chat/completions", chat)).toBe(400);
    expect(inRam(s)).toBe(true);
    expect(inSlot(s)).toBe(true);
    s.model.kv.ram.length = 0;
    expect(
      await post(s, "/completion", { prompt: "", n_predict: 0, json_schema: parameters, id_slot: 0 }),
    ).toBe(400);
    expect(inRam(s)).toBe(true);
    expect(inSlot(s)).toBe(true);
  });
});
