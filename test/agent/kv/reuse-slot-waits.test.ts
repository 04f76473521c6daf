import { expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KvDisk } from "../../../src/agent/kv/kv-disk.ts";
import type { QuietSave } from "../../../src/agent/kv/quiet-timer.ts";
import { PromptReuse, type ReuseDeps } from "../../../src/agent/kv/reuse.ts";
import type { LlamaLease } from "../../../src/runtime/endpoint.ts";
import { SlotUse } from "../../../src/runtime/slot-use.ts";

// Prompt reuse over a fake launch (no llama-server): its slot table is real (runtime/slot-use.ts),
// its /props answers nothing (no fingerprint: nothing goes to disk), and it counts as dead, so an
// erase's slot emptying (slot-clear.ts) sends nothing. What a save or erase under way on a slot
// is, the test sets itself (`working`).

function fake(slots = 1, extra: Partial<ReuseDeps> = {}) {
  const died = new AbortController();
  died.abort();
  const table = new SlotUse(slots);
  const launch = {
    id: 1,
    epoch: "1#0",
    died: died.signal,
    awake: true,
    slots: table,
    props: async () => undefined,
  };
  const lease = { launch } as unknown as LlamaLease;
  const quiets: QuietSave[] = [];
  const deps: ReuseDeps = {
    llama: { idle_sleep_s: 0 } as ReuseDeps["llama"],
    disk: new KvDisk(join(mkdtempSync(join(tmpdir(), "rr9-")), "kv"), 1 << 20),
    cacheRamBytes: () => 1 << 20,
    quietSeen: (q) => quiets.push(q),
    ...extra,
  };
  return { reuse: new PromptReuse(deps), lease, table, quiets };
}

const key = (s: string) => ({ userId: "u", sessionId: s });
const live = () => new AbortController().signal;

/** Until the turn begun has taken its slot (it waits there next, on the slot's work). */
async function taken(table: SlotUse): Promise<void> {
  for (let i = 0; i < 100 && table.idle(); i++) await Promise.resolve();
  expect(table.idle()).toBe(false);
}

test("a turn abandoned in a changed slot sets the quiet save again: the slot's changes are saved", async () => {
  const { reuse, lease, table, quiets } = fake();
  const first = await reuse.begin(lease, key("x"), live());
  first.end({ cut: 10, notes: [] }, true);
  expect(quiets.length).toBe(1);
  // x's next turn takes its slot; the quiet save fires while it is busy and saves nothing.
  const second = await reuse.begin(lease, key("x"), live());
  quiets[0]?.now();
  await quiets[0]?.ran;
  expect(table.dirty()).toEqual([]); // busy: not listed, not saved; set again (quiet-timer.ts)
  expect(quiets.length).toBe(2);
  second.abandon(); // cancelled before its request
  expect(table.dirty()).toEqual([{ slot: 0, holder: "u/x" }]);
  // Without a quiet save set again, nothing saves the slot before idle sleep empties it: the
  // abandon sets it anew, its idle wait from now.
  expect(quiets.length).toBe(3);
  quiets[2]?.now();
  await quiets[2]?.ran;
  expect(table.dirty()).toEqual([]);
});

test("a cancel cuts a turn's wait on its slot's save or erase", async () => {
  const { reuse, lease, table } = fake(1);
  (await reuse.begin(lease, key("x"), live())).end({ cut: 10, notes: [] }, true);
  table.working(0, new Promise<void>(() => {})); // an erase llama-server never answers
  const cancel = new AbortController();
  const turn = reuse.begin(lease, key("y"), cancel.signal);
  await taken(table);
  const settled = turn.then(
    () => "answered",
    () => "rejected",
  );
  cancel.abort(new Error("cancelled"));
  expect(await Promise.race([settled, Bun.sleep(50).then(() => "hung")])).toBe("rejected");
  // The slot is free again for the next turn.
  expect(table.dirty()).toEqual([{ slot: 0, holder: "u/x" }]);
});

test("a session edited by another core while its turn waits on its own slot sends no pre-edit tail", async () => {
  let edited = false;
  let mark = 1;
  const { reuse, lease, table } = fake(1, {
    mark: () => mark,
    stored: (_u, _s, since) => !(edited && since !== undefined),
  });
  const first = await reuse.begin(lease, key("x"), live());
  first.end({ cut: 40, notes: [] }, true);
  // A save under way on the slot (the quiet save's): x's next turn waits for it.
  const save = Promise.withResolvers<void>();
  table.working(0, save.promise);
  const next = reuse.begin(lease, key("x"), live());
  await taken(table);
  edited = true; // another core's `replace_from` of x lands during the wait
  mark = 2;
  save.resolve();
  const turn = await next;
  expect(turn.record.cut).toBe(0);
  turn.abandon();
});

test("a hand-over to the RAM cache, with nothing waited for, asks the store once per session in the slot", async () => {
  let asked = 0;
  const { reuse, lease, table } = fake(1, {
    gone: () => {
      asked++;
      return [];
    },
  });
  const note = { seq: 0, text: "n", ids: ["1"], sources: ["document:7"] };
  (await reuse.begin(lease, key("x"), live())).end({ cut: 10, notes: [note] }, true);
  asked = 0;
  // y takes x's changed slot: x goes to llama-server's RAM cache, no save, no wait (issue 31's path).
  const y = await reuse.begin(lease, key("y"), live());
  expect(table.holderOf(0)).toBe("u/y");
  expect(asked).toBe(1);
  y.abandon();
});
