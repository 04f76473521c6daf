import { afterEach, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import { pickFreePort } from "../../src/runtime/ports.ts";
import { writeFakeLlamaServer, writeFakeModel } from "../fixtures/llama-stand-in/binary.ts";
import { TRANSCRIPTS } from "../fixtures/recordings-dir.ts";
import { RpcWorkerStandIn } from "../fixtures/rpc-worker.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { waitFor } from "../fixtures/wait.ts";

// The RPC stand-ins checked against the recordings (test/fixtures/llama-server/README.md): the
// worker's bytes against transcripts/87-rpc-wire.txt, the llama-server stand-in's --rpc lines
// against 81, 82, 83.

const read = (file: string) => readFileSync(join(TRANSCRIPTS, file), "utf8");

function wire(): { requests: Buffer[]; replies: Buffer[] } {
  const bytes = (l: string) =>
    Buffer.from(
      (l.split("bytes: ")[1] as string)
        .trim()
        .split(/\s+/)
        .map((h) => Number.parseInt(h, 16)),
    );
  const lines = read("87-rpc-wire.txt").split("\n");
  return {
    requests: lines.filter((l) => l.startsWith("-> ")).map(bytes),
    replies: lines.filter((l) => l.startsWith("<- ")).map(bytes),
  };
}

/** Sends each request on one connection and collects exactly the expected reply lengths. */
async function exchange(port: number, requests: Buffer[], lengths: number[]): Promise<Buffer[]> {
  const socket = connect({ host: "127.0.0.1", port });
  await new Promise((resolve) => socket.on("connect", resolve));
  let buf = Buffer.alloc(0);
  socket.on("data", (c: Buffer) => {
    buf = Buffer.concat([buf, c]);
  });
  const out: Buffer[] = [];
  for (const [i, req] of requests.entries()) {
    socket.write(req);
    const want = lengths[i] as number;
    await waitFor(() => buf.length >= want);
    out.push(buf.subarray(0, want));
    buf = buf.subarray(want);
  }
  socket.destroy();
  return out;
}

describe("the worker stand-in as recorded (87-rpc-wire.txt, rpc-server-startup.txt)", () => {
  test("the recorded requests get the recorded replies, byte for byte", async () => {
    await using w = await new RpcWorkerStandIn().start();
    const { requests, replies } = wire();
    const got = await exchange(
      w.port,
      requests,
      replies.map((r) => r.length),
    );
    expect(got.map((b) => b.toString("hex"))).toEqual(replies.map((b) => b.toString("hex")));
    expect(w.received[0]).toEqual([...Buffer.concat(requests)]);
  });

  test("a first command that is not HELLO gets the connection reset", async () => {
    await using w = await new RpcWorkerStandIn().start();
    const socket = connect({ host: "127.0.0.1", port: w.port });
    const code = await new Promise<string | undefined>((resolve) => {
      socket.on("connect", () => socket.write(wire().requests[1] as Buffer));
      socket.on("error", (e: NodeJS.ErrnoException) => resolve(e.code));
      socket.on("close", () => resolve(undefined));
    });
    expect(code).toBe("ECONNRESET");
  });

  test("one client at a time: a second waits until the first leaves, then is served", async () => {
    await using w = await new RpcWorkerStandIn().start();
    const { requests, replies } = wire();
    const first = connect({ host: "127.0.0.1", port: w.port });
    await new Promise((r) => first.on("connect", r));
    first.write(requests[0] as Buffer);
    await waitFor(() => w.accepted === 1);
    const second = exchange(w.port, [requests[0] as Buffer], [(replies[0] as Buffer).length]);
    await Bun.sleep(100);
    expect(w.accepted).toBe(1);
    first.destroy();
    expect((await second)[0]!.toString("hex")).toBe((replies[0] as Buffer).toString("hex"));
  });
});

describe.skipIf(process.platform === "win32")(
  "the llama-server stand-in's --rpc as recorded (81, 82, 83)",
  () => {
    let dir: ReturnType<typeof tmpdir> | undefined;
    const procs: ReturnType<typeof Bun.spawn>[] = [];
    afterEach(() => {
      for (const p of procs.splice(0)) p.kill("SIGKILL");
      dir?.[Symbol.dispose]();
    });

    async function launch(rpc: string, knobs: Record<string, string> = {}) {
      dir = tmpdir();
      const binary = writeFakeLlamaServer(dir.path, { FAKE_LLAMA_LOAD_MS: "0", ...knobs });
      const model = writeFakeModel(dir.path);
      const port = await pickFreePort();
      const proc = Bun.spawn([binary, "-m", model, "--rpc", rpc, "-ngl", "99", "--port", String(port)], {
        env: { PATH: process.env.PATH ?? "" },
        stdout: "ignore",
        stderr: "pipe",
      });
      procs.push(proc);
      let stderr = "";
      const decoder = new TextDecoder();
      void (async () => {
        for await (const c of proc.stderr) stderr += decoder.decode(c, { stream: true });
      })();
      await waitFor(
        () => stderr.includes("listening on") || proc.exitCode !== null || proc.signalCode !== null,
      );
      return { proc, port, stderr: () => stderr };
    }

    /** A recorded line with its time stamp and endpoint turned into patterns. */
    const form = (line: string) =>
      new RegExp(
        line
          .replace(/^\d+\.\d+\.\d+\.\d+ /, "")
          .replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
          .replace(/127\\\.0\\\.0\\\.1:\d+/g, "127\\.0\\.0\\.1:\\d+")
          .replace(/\d+ MiB/g, "\\d+ MiB"),
      );

    test("each worker is a device RPC<n> with its memory, in --rpc order (81)", async () => {
      await using a = await new RpcWorkerStandIn().start();
      await using b = await new RpcWorkerStandIn().start();
      const s = await launch(`${a.endpoint},${b.endpoint}`);
      const recorded = read("81-rpc-two-servers-split.log")
        .split("\n")
        .filter((l) => /common_param: {3}- RPC\d/.test(l));
      expect(recorded).toHaveLength(2);
      const mine = s
        .stderr()
        .split("\n")
        .filter((l) => /common_param: {3}- RPC\d/.test(l));
      expect(mine).toHaveLength(2);
      for (const [i, l] of mine.entries()) expect(l).toMatch(form(recorded[i] as string));
      expect(mine[0]).toContain(`RPC0    : ${a.endpoint} (24105 MiB, 24105 MiB free)`);
      expect(mine[1]).toContain(`RPC1    : ${b.endpoint}`);
      // It holds both workers: a worker serves one client at a time.
      expect([a.accepted, b.accepted]).toEqual([1, 1]);
    });

    test("an unreachable worker is skipped with one E line and the server still starts (82)", async () => {
      const closed = await pickFreePort();
      const s = await launch(`127.0.0.1:${closed}`);
      const recorded = read("82-rpc-unreachable.log")
        .split("\n")
        .find((l) => l.includes("Failed to connect"))!;
      const line = s
        .stderr()
        .split("\n")
        .find((l) => l.includes("Failed to connect"))!;
      expect(line).toMatch(form(recorded));
      expect(line).toMatch(/^\d+\.\d+\.\d+\.\d+ E Failed to connect to 127\.0\.0\.1:\d+$/);
      expect((await fetch(`http://127.0.0.1:${s.port}/health`)).status).toBe(200);
    });

    test("a worker that dies: the next request aborts the server with the recorded lines, SIGABRT (83)", async () => {
      await using a = await new RpcWorkerStandIn().start();
      const s = await launch(a.endpoint);
      const chat = () =>
        fetch(`http://127.0.0.1:${s.port}/v1/chat/completions`, {
          method: "POST",
          body: JSON.stringify({ messages: [{ role: "user", content: "hi" }], max_tokens: 8 }),
        });
      expect((await chat()).status).toBe(200);
      await a.kill();
      const dropped = await chat().then(
        () => "answered",
        () => "dropped",
      );
      expect(dropped).toBe("dropped"); // curl exit 52 in the recording
      await s.proc.exited;
      expect(s.proc.signalCode).toBe("SIGABRT");
      const recorded = read("83-rpc-worker-dies.log").split("\n");
      for (const key of ["send failed", "Remote RPC server crashed"]) {
        const want = recorded.find((l) => l.includes(key))!;
        expect(
          s
            .stderr()
            .split("\n")
            .find((l) => l.includes(key))!,
        ).toMatch(form(want));
      }
    });
  },
);
