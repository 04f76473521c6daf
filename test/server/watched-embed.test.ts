import { afterEach, describe, expect, test } from "bun:test";
import { ConnectionRefused } from "../../src/llama/errors.ts";
import { watchedEmbed } from "../../src/server/watched-embed.ts";
import { deadLease } from "../fixtures/dead-lease.ts";
import { TINY_EMBED } from "../fixtures/llama-stand-in/embeddings.ts";
import { LlamaStandIn } from "../fixtures/llama-stand-in/in-process.ts";

// An embedding asked of a llama-server that died a moment ago (its exit not yet seen) reached no
// server: as a chat's request (agent/watched-completion.ts), it is asked again, once, on the lease
// moved to the restarted server, not failed back to the host or to memory's job.

const never = () => new AbortController().signal;

let standIn: LlamaStandIn | undefined;
afterEach(() => {
  standIn?.stop();
  standIn = undefined;
});

describe("watchedEmbed and a server that is gone", () => {
  test("refused: the lease moves to the restarted server and the embedding is asked there, once", async () => {
    const live = new LlamaStandIn({ nCtx: 512, embedding: TINY_EMBED });
    standIn = live;
    const { lease, calls } = await deadLease(() => ({ baseUrl: live.baseUrl, apiKey: live.apiKey }));
    const out = await watchedEmbed(lease, ["alpha", "beta"], never());
    expect(out.embeddings).toHaveLength(2);
    expect(calls).toEqual({ reconnects: 1, failures: [] });
  });

  test("refused again by the restarted one: reported and thrown, no third try", async () => {
    const { lease, calls } = await deadLease(() => ({ baseUrl: lease.baseUrl, apiKey: "k" }));
    const err = await watchedEmbed(lease, ["alpha"], never()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectionRefused);
    expect(calls.reconnects).toBe(1);
    expect(calls.failures).toHaveLength(1);
  });
});
