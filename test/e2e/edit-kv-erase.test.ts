import { describe, expect, test } from "bun:test";
import { copyFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { spawnCore } from "../fixtures/core-process.ts";
import { filesHolding } from "../fixtures/files-holding.ts";
import { waitUntil, writeStack } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// An edit (`replace_from`) or a regenerate erases the tail it replaces (docs/agent.md "The
// store"); the saved KV state (docs/agent.md#prompt-reuse) holds that tail too: the session's own
// state saved before the edit, and other sessions' states whose memory notes quote it (their
// sidecars even hold the notes' text). A hostile review found both left in data_dir/kv for good
// when another session took the one slot before the edited one was saved again. The stand-in's
// state files hold the tokens as text, so the words are found by their bytes.
const onPosix = process.platform !== "win32";

/** A chat that must end with a result, each under a new id. */
function chatsOf(core: Pick<ReturnType<typeof spawnCore>, "request">) {
  let id = 0;
  return async (params: Record<string, unknown>) => {
    const r = await core.request({ id: ++id, method: "chat", params }, 30_000);
    expect(r.type).toBe("result");
  };
}

/** No file under `kv` holds `word`, nor after the core's shutdown (its last saves). */
async function goneForGood(core: ReturnType<typeof spawnCore>, kv: string, word: string) {
  expect(filesHolding(kv, word)).toEqual([]);
  await core.request({ id: "stop", method: "shutdown" });
  expect(await core.exited(10_000)).toBe(0);
  expect(filesHolding(kv, word)).toEqual([]);
}

describe.skipIf(!onPosix)("an edit's erase reaches the saved KV state", () => {
  test("the session's own state and the states quoting it hold nothing of the replaced tail", async () => {
    await using dir = tmpdir();
    const ok = { content: "noted." };
    const stack = writeStack(dir.path, {
      tools: [],
      script: [ok, ok, ok, { content: "the answer is QMREGENKV" }, ok, ok, ok, ok, ok, ok],
    });
    const kv = join(stack.dataDir, "kv");
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    const chat = chatsOf(core);
    const saved = (word: string) => waitUntil(() => filesHolding(kv, word).length > 0, 10_000);

    // The session's own state, saved once the server is quiet, then its message edited and the
    // one slot taken by another session before the edited one is saved again.
    await chat({ session_id: "a", input: "my secret QMEDITKV here" });
    expect(await saved("QMEDITKV")).toBe(true);
    await chat({ session_id: "a", input: "nothing here", replace_from: 0 });
    await chat({ session_id: "b", input: "something else" });

    // A regenerated answer, likewise.
    await chat({ session_id: "r", input: "tell me" });
    expect(await saved("QMREGENKV")).toBe(true);
    await chat({ session_id: "r", regenerate: true });
    await chat({ session_id: "b", input: "and more" });

    // Another session's notes quote the session (memory); then its message is edited.
    await chat({ session_id: "c", input: "the QMNOTEKV codeword is kept" });
    await chat({ session_id: "d", input: "what is the codeword kept" });
    expect(await saved("QMNOTEKV")).toBe(true);
    await chat({ session_id: "c", input: "plain words", replace_from: 0 });

    for (const word of ["QMEDITKV", "QMREGENKV", "QMNOTEKV"]) expect(filesHolding(kv, word)).toEqual([]);
    await core.request({ id: "stop", method: "shutdown" });
    expect(await core.exited(10_000)).toBe(0);
    for (const word of ["QMEDITKV", "QMREGENKV", "QMNOTEKV"]) expect(filesHolding(kv, word)).toEqual([]);
  }, 60_000);
  test("an edit the server's crash broke off, finished by a resume, erases the pre-edit state too", async () => {
    // The edit's own chat ends in an error (llama-server died mid-reply): the edit is committed
    // by the resume that finishes it, whose params name no edit. The session's state saved before
    // the edit (a photo's embedding, the replaced words) must go then, as after any edit.
    await using dir = tmpdir();
    const stack = writeStack(dir.path, {
      tools: [],
      script: [{ content: "noted." }, { content: "a b c d e f", crash_after_chunks: 2 }],
    });
    const kv = join(stack.dataDir, "kv");
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    const chat = chatsOf(core);
    await chat({ session_id: "a", input: "my secret QMRESUMEKV here" });
    expect(await waitUntil(() => filesHolding(kv, "QMRESUMEKV").length > 0, 10_000)).toBe(true);
    const broken = await core.request(
      { id: "edit", method: "chat", params: { session_id: "a", input: "nothing here", replace_from: 0 } },
      30_000,
    );
    expect(broken.type).toBe("error");
    // A restarted stand-in reads its script from the start: from now on it echoes.
    writeFileSync(stack.env.FAKE_LLAMA_SCRIPT, "[]");
    await chat({ session_id: "a", resume: true });
    await chat({ session_id: "b", input: "something else" });
    await goneForGood(core, kv, "QMRESUMEKV");
  }, 60_000);
  test("a broken-off turn a fresh chat sets aside leaves nothing of it in the saved state", async () => {
    // The user gives up on the interrupted turn (a photo, a secret) and asks something else: the
    // turn's words and images were never part of the conversation, and go as an edit's tail does.
    await using dir = tmpdir();
    const stack = writeStack(dir.path, {
      tools: [],
      script: [{ content: "one two three four five six seven eight", chunk_delay_ms: 300, hang: true }],
    });
    const kv = join(stack.dataDir, "kv");
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    const chat = chatsOf(core);
    core.send({ id: "slow", method: "chat", params: { session_id: "a", input: "my secret QMASIDEKV here" } });
    await core.waitFor((ms) => ms.some((m) => m.id === "slow" && m.event === "llm_chunk"));
    await core.request({ id: "x", method: "cancel", params: { request_id: "slow" } });
    await core.waitFor(() => core.terminal("slow") !== undefined);
    expect(await waitUntil(() => filesHolding(kv, "QMASIDEKV").length > 0, 10_000)).toBe(true);
    await chat({ session_id: "a", input: "something new" });
    await chat({ session_id: "b", input: "something else" });
    await goneForGood(core, kv, "QMASIDEKV");
  }, 60_000);
  test("a turn that set aside a broken-off one, broken off itself and finished by a resume, erases it too", async () => {
    // The fresh turn that sets the interrupted one aside ends in an error (llama-server died
    // mid-reply): it is committed by the resume that finishes it, which sets nothing aside
    // itself. The set-aside turn's words must go then, as after an edit finished by a resume.
    await using dir = tmpdir();
    const stack = writeStack(dir.path, {
      tools: [],
      script: [
        { content: "one two three four five six seven eight", chunk_delay_ms: 300, hang: true },
        { content: "a b c d e f", crash_after_chunks: 2 },
      ],
    });
    const kv = join(stack.dataDir, "kv");
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    const chat = chatsOf(core);
    core.send({
      id: "slow",
      method: "chat",
      params: { session_id: "a", input: "my secret QMASIDERESUMEKV here" },
    });
    await core.waitFor((ms) => ms.some((m) => m.id === "slow" && m.event === "llm_chunk"));
    await core.request({ id: "x", method: "cancel", params: { request_id: "slow" } });
    await core.waitFor(() => core.terminal("slow") !== undefined);
    expect(await waitUntil(() => filesHolding(kv, "QMASIDERESUMEKV").length > 0, 10_000)).toBe(true);
    const broken = await core.request(
      { id: "fresh", method: "chat", params: { session_id: "a", input: "something new" } },
      30_000,
    );
    expect(broken.type).toBe("error");
    // A restarted stand-in reads its script from the start: from now on it echoes.
    writeFileSync(stack.env.FAKE_LLAMA_SCRIPT, "[]");
    await chat({ session_id: "a", resume: true });
    await chat({ session_id: "b", input: "something else" });
    await goneForGood(core, kv, "QMASIDERESUMEKV");
  }, 60_000);
  test("a set-aside turn erases its session's state only, not the states that quote the session's notes", async () => {
    // A stop, then a new message, is a set-aside: nothing the session had committed changed, so
    // another session's saved state quoting its memory notes holds nothing to erase; dropping it
    // (and its slot) only made that session read its whole prompt again.
    await using dir = tmpdir();
    const ok = { content: "noted." };
    const stack = writeStack(dir.path, {
      tools: [],
      script: [
        ok,
        ok,
        { content: "one two three four five six seven eight", chunk_delay_ms: 300, hang: true },
      ],
    });
    const kv = join(stack.dataDir, "kv");
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    const chat = chatsOf(core);
    await chat({ session_id: "c", input: "the QMQUOTEDKV codeword is kept" });
    await chat({ session_id: "d", input: "what is the codeword kept QMQUOTINGKV" });
    expect(await waitUntil(() => filesHolding(kv, "QMQUOTINGKV").length > 0, 10_000)).toBe(true);
    core.send({
      id: "slow",
      method: "chat",
      params: { session_id: "c", input: "my secret QMSTOPPEDKV here" },
    });
    await core.waitFor((ms) => ms.some((m) => m.id === "slow" && m.event === "llm_chunk"));
    await core.request({ id: "x", method: "cancel", params: { request_id: "slow" } });
    await core.waitFor(() => core.terminal("slow") !== undefined);
    expect(await waitUntil(() => filesHolding(kv, "QMSTOPPEDKV").length > 0, 10_000)).toBe(true);
    expect(filesHolding(kv, "QMQUOTINGKV")[0]).not.toBe(filesHolding(kv, "QMSTOPPEDKV")[0]);
    await chat({ session_id: "c", input: "something new" });
    expect(filesHolding(kv, "QMQUOTINGKV").length).toBeGreaterThan(0);
    await chat({ session_id: "b", input: "something else" });
    await goneForGood(core, kv, "QMSTOPPEDKV");
  }, 60_000);
  test("several models: the session's pre-edit state in another model's slot is not saved after the edit", async () => {
    // The session last ran on `second`, whose slot still holds it unsaved; the edit runs on the
    // default model, whose slot is saved once it is quiet. Another chat keeps `second` busy past
    // that, so its own quiet save comes last: the session's pre-edit slot, replaced tail and
    // all, would be saved over the edited state, back in data_dir/kv for good.
    await using dir = tmpdir();
    const ok = { content: "noted." };
    const stack = writeStack(dir.path, {
      tools: [],
      script: [ok, ok, ok, ok],
      parallel: 2,
      extraYaml: "models:\n  - {name: second, path: ./second.gguf, context: 1024}\n",
    });
    const first = readdirSync(dir.path).find((f) => f.endsWith(".gguf")) as string;
    copyFileSync(join(dir.path, first), join(dir.path, "second.gguf"));
    const kv = join(stack.dataDir, "kv");
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    const chat = chatsOf(core);
    await chat({ session_id: "a", input: "my secret QMOTHERKV here", model: "second" });
    await chat({ session_id: "a", input: "nothing here", replace_from: 0 });
    await chat({ session_id: "c", input: "something else", model: "second" });
    // The shutdown saves what each model's slots changed since their quiet save, as that save
    // would (reuse.ts `saveQuietly`): waiting out both quiet saves (2 s) only made it slower.
    await core.request({ id: "stop", method: "shutdown" });
    expect(await core.exited(10_000)).toBe(0);
    expect(filesHolding(kv, "QMOTHERKV")).toEqual([]);
    // The saves ran: a's edited state (the default model's) and c's (second's).
    expect(readdirSync(kv).filter((f) => f.endsWith(".bin"))).toHaveLength(2);
  }, 60_000);
});
