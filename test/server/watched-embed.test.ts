import { afterEach, describe, expect, test } from "bun:test";
import { ConnectionRefused } from "../../src/llama/errors.ts";
import { CoreError, cancelledError } from "../../src/protocol/errors.ts";
import type { LlamaLease } from "../../src/runtime/endpoint.ts";
import { CrashSuspects } from "../../src/server/embed-suspects.ts";
import { watchedEmbed } from "../../src/server/watched-embed.ts";
import { deadLease } from "../fixtures/dead-lease.ts";
import { TINY_EMBED } from "../fixtures/llama-stand-in/embeddings.ts";
import { LlamaStandIn } from "../fixtures/llama-stand-in/in-process.ts";
import { waitFor } from "../fixtures/wait.ts";

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

// An input llama-server crashes on (a stand-in behaviour, model.ts `embedCrashOn`, modelled on the
// recorded aborts mid-request) is named once it crashed the server alone at a second death in a
// row (server/embed-suspects.ts); a server stopped on purpose (`cancelled`) convicts nothing, nor
// one the core restarts for a failure of its own finding (supervisor.ts reportFailure, failReady:
// an RPC worker lost, a wedge), its error no exit's.
describe("watchedEmbed and a server that dies with the request in flight", () => {
  const cases = [
    {
      how: "crashed",
      end: () =>
        new CoreError("internal_error", "llama-server crashed (exit code 134)", {
          exit_code: 134,
          signal: null,
          log_tail: [],
        }),
      code: "internal_error",
      named: true,
    },
    {
      // llama-server never kills itself so: the OS's OOM killer (memory pressure from anything
      // on the machine) or a person did, and the input in flight is not why.
      how: "killed by SIGKILL",
      end: () =>
        new CoreError("internal_error", "llama-server crashed (killed by SIGKILL)", {
          exit_code: null,
          signal: "SIGKILL",
          log_tail: [],
        }),
      code: "internal_error",
      named: false,
    },
    {
      how: "stopped on purpose",
      end: () => cancelledError("llama-server was stopped (failure)"),
      code: "cancelled",
      named: false,
    },
    {
      how: "restarted by the core",
      end: () =>
        new CoreError(
          "internal_error",
          "llama-server stopped serving (RPC worker 10.0.0.2:50052 unreachable); it will be restarted",
          { log_tail: [] },
        ),
      code: "internal_error",
      named: false,
    },
  ];
  for (const { how, end, code, named } of cases)
    test(`${how}: ${named ? "the input is named the second time" : "no input is blamed"}`, async () => {
      const live = new LlamaStandIn({ nCtx: 512, embedding: TINY_EMBED });
      standIn = live;
      live.model.embedCrashOn = "POISON";
      let server = new AbortController();
      live.onCrash = () => server.abort(end());
      const { lease } = await deadLease();
      const onLive: LlamaLease = {
        ...lease,
        baseUrl: live.baseUrl,
        apiKey: live.apiKey,
        get died() {
          return server.signal;
        },
      };
      const suspects = new CrashSuspects();
      const send = () => {
        server = new AbortController();
        return watchedEmbed(onLive, ["a POISON pill"], never(), undefined, suspects).catch((e: unknown) => e);
      };
      const first = await send();
      expect(first).toMatchObject({ code });
      if (named) expect(first).toMatchObject({ data: { reason: "server_failed" } });
      const second = await send();
      expect(live.crashes).toBe(2);
      if (named) expect(second).toMatchObject({ kind: "crashes_server", data: { index: 0 } });
      else expect(second).toMatchObject({ code });
      // Named, it is never sent again.
      await send();
      expect(live.crashes).toBe(named ? 2 : 3);
    });
});

// Two senders on one server (memory's job and a host's loop): the one whose input crashes it
// and one whose input is innocent are both in flight at each death. Neither was alone on the
// server, so neither death says which input it was: the innocent one must not be refused.
describe("watchedEmbed and a death with another request in flight on the server", () => {
  test("the innocent input, in flight alone in its request at two deaths, is not named and embeds after", async () => {
    const death = () =>
      new CoreError("internal_error", "llama-server crashed (exit code 134)", {
        exit_code: 134,
        signal: null,
        log_tail: [],
      });
    let live: LlamaStandIn | undefined;
    let server = new AbortController();
    const { lease } = await deadLease();
    const onLive: LlamaLease = {
      ...lease,
      get baseUrl() {
        return live?.baseUrl ?? "";
      },
      get apiKey() {
        return live?.apiKey ?? "";
      },
      get died() {
        return server.signal;
      },
    };
    // Each life: a server on which the innocent request waits (accepted, not yet answered) when
    // the poisoned one arrives and kills the process, dropping both connections.
    const life = () => {
      const next = new LlamaStandIn({ nCtx: 512, embedding: TINY_EMBED });
      standIn = next;
      next.model.embedCrashOn = "POISON";
      next.onCrash = () => {
        server.abort(death());
        next.stop();
      };
      server = new AbortController();
      live = next;
      return next;
    };
    const suspects = new CrashSuspects();
    const send = (text: string) =>
      watchedEmbed(onLive, [text], never(), undefined, suspects).catch((e: unknown) => e);
    for (let round = 0; round < 2; round++) {
      const now = life();
      now.model.embedWedges = 1;
      const innocent = send("an innocent line");
      expect(await waitFor(() => now.model.embedWedges === 0)).toBe(true);
      const poisoned = send("a POISON pill");
      expect(await innocent).toMatchObject({ code: "internal_error", data: { reason: "server_failed" } });
      // Neither alone on the server: the poisoned one is not named either (yet).
      expect(await poisoned).toMatchObject({ code: "internal_error" });
    }
    life();
    const again = await send("an innocent line");
    expect(again).toMatchObject({ embeddings: [expect.any(Array)] });
  });
});
