import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { spawnCore } from "../fixtures/core-process.ts";
import { filesHolding } from "../fixtures/files-holding.ts";
import { writeStack } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// Documents from the compiled binary (docs/protocol.md "documents.add"): HTML read as
// its text, formats it does not read refused, each user's and each session's documents searched
// by their own chats only, a session's attachment erased with it; citations of turns.

describe.skipIf(process.platform === "win32")("documents' formats and scope (compiled core)", () => {
  test("HTML's text without its markup; binary refused; users and sessions see their own; erased with the session", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, { tools: [] });
    const html = join(dir.path, "page.html");
    writeFileSync(
      html,
      "<html><head><style>.zz{color:red}</style><script>var SCRIPTWORD=1</script></head>" +
        '<body><p class="MARKUPCLASS">The OKAPI lives in forests.</p></body></html>',
    );
    const bin = join(dir.path, "x.bin");
    writeFileSync(bin, Buffer.from([0, 1, 2, 3, 0, 0, 255, 254, 0, 7]));
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    const req = (id: string, method: string, params: Record<string, unknown>) =>
      core.request({ id, method, params }, 30_000);

    const page = await req("h", "documents.add", { path: html });
    expect(page.result).toMatchObject({ name: "page.html", format: "html", chunks: 1 });
    expect(filesHolding(stack.dataDir, "OKAPI", "logs").length).toBeGreaterThan(0);
    expect(filesHolding(stack.dataDir, "MARKUPCLASS", "logs")).toEqual([]);
    expect(filesHolding(stack.dataDir, "SCRIPTWORD", "logs")).toEqual([]);
    expect(await req("b", "documents.add", { path: bin })).toMatchObject({
      code: "invalid_request",
      data: { reason: "unsupported_format" },
    });
    expect(await req("n", "documents.add", { text: "x", name: "x.txt", session_id: "nope" })).toMatchObject({
      code: "invalid_request",
      data: { field: "session_id", reason: "session_not_found" },
    });

    // Another user's library: listed, searched and deleted by that user alone.
    const bobs = await req("bob", "documents.add", {
      user_id: "bob",
      text: "The ZEBRA grazes.",
      name: "z.txt",
    });
    const mine = (await req("l1", "documents.list", {})).result.documents;
    expect(mine.map((d: any) => d.name)).toEqual(["page.html"]);
    expect(mine[0]).toMatchObject({
      session_id: null,
      created_at: expect.any(String),
      bytes: expect.any(Number),
    });
    expect((await req("l2", "documents.list", { user_id: "bob" })).result.documents).toHaveLength(1);
    expect(await req("d", "documents.delete", { document_id: bobs.result.document_id })).toMatchObject({
      code: "invalid_request",
      data: { field: "document_id", reason: "document_not_found" },
    });
    const bobAsks = await req("c0", "chat", { user_id: "bob", input: "okapi forests?" });
    expect(bobAsks.result.sources).toEqual([]);

    // A session's attachment: searched by that session's chats, not by the user's others.
    for (const s of ["s1", "s2"])
      expect((await req(`c-${s}`, "chat", { session_id: s, input: "hello" })).type).toBe("result");
    const att = await req("a", "documents.add", {
      session_id: "s1",
      text: "The WOMBAT digs burrows.",
      name: "w.txt",
    });
    const listed = (await req("l3", "documents.list", { session_id: "s1" })).result.documents;
    expect(listed.map((d: any) => [d.name, d.session_id])).toEqual([["w.txt", "s1"]]);
    const cited = (id: string, session: string, input: string) =>
      req(id, "chat", { session_id: session, input }).then((r) =>
        r.result.sources
          .filter((s: any) => s.kind === "document")
          .map((s: any) => s.name)
          .sort(),
      );
    expect(await cited("c2", "s2", "wombat burrows?")).toEqual([]);
    expect(await cited("c1", "s1", "wombat burrows? okapi forests?")).toEqual(["page.html", "w.txt"]);
    expect(att.result.document_id).toBeString();

    // A turn is cited as one: kind turn, its session's id.
    await req("t1", "chat", { session_id: "s3", input: "remember MYTURNWORD please" });
    const turn = await req("t2", "chat", { session_id: "s4", input: "MYTURNWORD again" });
    expect(turn.result.sources).toContainEqual(expect.objectContaining({ kind: "turn", id: "s3" }));

    expect((await req("sd", "sessions.delete", { session_id: "s1" })).result.deleted).toBe(true);
    expect(filesHolding(stack.dataDir, "WOMBAT", "logs")).toEqual([]);
    expect((await req("l4", "documents.list", {})).result.documents.map((d: any) => d.name)).toEqual([
      "page.html",
    ]);
  }, 90_000);
});
