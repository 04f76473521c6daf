import { describe, expect, test } from "bun:test";
import { linkSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ChatHarness, type Msg } from "../agent/harness.ts";

const plain = { agents: [{ name: "plain" }], memory: { enabled: true, top_k: 5 } };

async function add(h: ChatHarness, id: string, path: string) {
  h.send(id, "documents.add", { path });
  return (await h.terminal(id)) as Msg & { result?: unknown; code?: string; message?: string; data?: any };
}

// A document is quoted into this user's prompts: the core's own files hold every user's words
// (app.data_dir) and the config's secrets (docs/agent.md "Documents").
describe("documents.add never reads the core's own files", () => {
  test("a file under app.data_dir, by its path or a link to it, is refused naming the path", async () => {
    await using h = new ChatHarness(plain);
    mkdirSync(join(h.dataDir, "kv"), { recursive: true });
    const note = join(h.dataDir, "kv", "other-user.json");
    writeFileSync(note, "another user's SECRET-NOTE");
    const direct = await add(h, "a1", note);
    expect(direct).toMatchObject({ code: "invalid_request", data: { field: "path", problem: "unreadable" } });
    expect(direct.message).toContain("inside app.data_dir");
    const link = join(h.dir.path, "innocent.md");
    symlinkSync(note, link);
    expect(await add(h, "a2", link)).toMatchObject({ code: "invalid_request", data: { field: "path" } });
    const listed = await (async () => {
      h.send("l", "documents.list", {});
      return (await h.terminal("l")) as Msg & { result: { documents: unknown[] } };
    })();
    expect(listed.result.documents).toEqual([]);
  });

  test("the config file, by its path or a hard link, is refused; a file beside it is read", async () => {
    await using h = new ChatHarness(plain);
    const config = join(h.dir.path, "config.yaml");
    const refused = await add(h, "c1", config);
    expect(refused).toMatchObject({
      code: "invalid_request",
      data: { field: "path", problem: "unreadable" },
    });
    expect(refused.message).toContain("config file");
    const hard = join(h.dir.path, "notes.md");
    linkSync(config, hard);
    expect(await add(h, "c2", hard)).toMatchObject({ code: "invalid_request", data: { field: "path" } });
    const beside = join(h.dir.path, "beside.md");
    writeFileSync(beside, "# Beside\n\nA document of the user's own.");
    expect(await add(h, "c3", beside)).toMatchObject({ type: "result", result: { name: "beside.md" } });
  });
});
