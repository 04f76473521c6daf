import { describe, expect, test } from "bun:test";
import { checkWorkers } from "../../src/rpc/check.ts";
import type { WorkerReport } from "../../src/rpc/client.ts";
import { rpcWorkerSnapshot, WorkerBook } from "../../src/rpc/workers.ts";
import { RpcWatch } from "../../src/runtime/rpc-watch.ts";

// Several models (docs/supervisor.md "Scheduling several models"): one supervisor, so one RpcWatch,
// per model, all writing the process's one worker book. A chat model's llama-server holds the
// workers; the embedding model beside it runs with none (embedding-planner.ts). Its start and its
// end must not make the book forget the chat model's workers are held.

const W = "127.0.0.1:50152";
const answered: WorkerReport = {
  endpoint: W,
  ok: true,
  version: { major: 5, minor: 1, patch: 0 },
  devices: [{ free_bytes: 8 * 2 ** 30, total_bytes: 8 * 2 ** 30 }],
  ms: 1,
};

function watches() {
  const book = new WorkerBook();
  const make = () => new RpcWatch({ onLost: () => {}, book, accepts: async () => true });
  book.record(answered);
  return { book, chat: make(), embed: make() };
}

describe("the worker book with several llama-servers", () => {
  test("another model's launch without workers, and its end, leave the chat model's workers in use", async () => {
    const { book, chat, embed } = watches();
    chat.begin([W]);
    embed.begin([]);
    expect(rpcWorkerSnapshot([W], book)[0]!.state).toBe("in_use");
    embed.ended();
    expect(rpcWorkerSnapshot([W], book)[0]!.state).toBe("in_use");
    // Doctor and plan meanwhile do not ask a worker that could not answer (it serves one client).
    let asked = 0;
    const reports = await checkWorkers(
      [{ endpoint: W, host: "127.0.0.1", port: 50152, memory_bytes: null }],
      {
        book,
        query: async () => {
          asked++;
          return { endpoint: W, ok: false, failure: "timeout", message: "did not answer", ms: 2000 };
        },
      },
    );
    expect(asked).toBe(0);
    expect(reports[0]).toMatchObject({ ok: true, in_use: true });
    chat.ended();
    expect(rpcWorkerSnapshot([W], book)[0]!.state).toBe("ok");
  });

  test("a worker lost by one launch is lost, whoever else listed it", () => {
    const { book, chat } = watches();
    chat.begin([W]);
    book.lost(W, "stopped accepting connections");
    expect(book.isInUse(W)).toBe(false);
    expect(rpcWorkerSnapshot([W], book)[0]!.state).toBe("lost");
  });
});
