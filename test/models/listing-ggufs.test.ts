import { describe, expect, test } from "bun:test";
import { HubBadAnswer, HubClient } from "../../src/models/hub-client.ts";
import { listRepoFiles } from "../../src/models/hub-listing.ts";
import { MAX_LISTED_GGUFS } from "../../src/models/pick-gguf.ts";
import { fromHub } from "../../src/models/pull-errors.ts";
import type { CoreError } from "../../src/protocol/errors.ts";

// The listing a pull or a remote fit check picks its GGUF from (docs/models.md "The hub's
// listing"): the pick groups, sorts and matches every GGUF name in one stretch, and a hostile
// hub's 400,000 names held the loop ~3.4 s, `ping` and `cancel` waiting. Past MAX_LISTED_GGUFS
// the listing is refused, before any pick; the files that are not GGUFs are not kept at all.
const HUB = "https://hub.example";
const COMMIT = "a".repeat(40);
const TREE = `${HUB}/api/models/org/m/tree/${COMMIT}?recursive=true`;
const OID = "b".repeat(40);

function fakeHub(page: () => unknown[]): typeof fetch {
  return (async (input: string | URL | Request) =>
    String(input) === TREE
      ? Response.json(page())
      : new Response("not here", { status: 404 })) as typeof fetch;
}

const access = (fetchImpl: typeof fetch) => ({
  endpoint: HUB,
  token: null,
  fetch: fetchImpl,
  offline: false,
  timeoutMs: 10_000,
});

describe("a listing of more GGUFs than a pick may take", () => {
  // Three times the bound (a hostile hub listed 400,000 under the 64 MiB bound): refused at its first past it.
  const many = () =>
    Array.from({ length: 30_000 }, (_, i) => ({
      type: "file",
      oid: OID,
      size: 1,
      path: `m-${i}-Q4_K_M.gguf`,
    }));

  test("a pull refuses it as the hub's error, naming the bound, before it picks", async () => {
    const err = await new HubClient({ endpoint: HUB, fetch: fakeHub(many) })
      .listFiles("org/m", COMMIT)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HubBadAnswer);
    const pull = fromHub(err, { repo: "org/m" }) as CoreError;
    expect(pull.data).toMatchObject({ cause: "hub_error", reason: "server_error" });
    expect(pull.message).toContain(`names more than ${MAX_LISTED_GGUFS.toLocaleString("en")} GGUF files`);
  });

  test("the remote fit check refuses it the same way", async () => {
    const err = await listRepoFiles(access(fakeHub(many)), "org/m", COMMIT).catch((e: CoreError) => e);
    expect(err).toMatchObject({ code: "model_missing", data: { problem: "hub_error", repo: "org/m" } });
    expect((err as Error).message).toContain(
      `names more than ${MAX_LISTED_GGUFS.toLocaleString("en")} GGUF files`,
    );
  });

  test("a listing of exactly the bound is taken", async () => {
    const page = () =>
      Array.from({ length: MAX_LISTED_GGUFS }, (_, i) => ({
        type: "file",
        oid: OID,
        size: 1,
        path: `m-${i}.gguf`,
      }));
    const files = await new HubClient({ endpoint: HUB, fetch: fakeHub(page) }).listFiles("org/m", COMMIT);
    expect(files).toHaveLength(MAX_LISTED_GGUFS);
  });
});

describe("the files of a listing that are not GGUFs", () => {
  test("are checked but not kept: a repo of many other files pulls its GGUF", async () => {
    // A repo of 50,000 small files besides its model (no GGUF bound applies to them): each was
    // kept, mapped and filtered by the pick in one stretch, ~0.3 s of a pull's loop.
    const page = () => [
      ...Array.from({ length: 50_000 }, (_, i) => ({ type: "file", oid: OID, size: 1, path: `d/${i}.txt` })),
      { type: "file", oid: OID, size: 1, path: "m-Q4_K_M.GGUF" },
    ];
    const pulled = await new HubClient({ endpoint: HUB, fetch: fakeHub(page) }).listFiles("org/m", COMMIT);
    expect(pulled.map((f) => f.path)).toEqual(["m-Q4_K_M.GGUF"]);
    const remote = await listRepoFiles(access(fakeHub(page)), "org/m", COMMIT);
    expect(remote.map((f) => f.path)).toEqual(["m-Q4_K_M.GGUF"]);
  });
});
