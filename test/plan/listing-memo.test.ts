import { describe, expect, spyOn, test } from "bun:test";
import {
  ListingMemo,
  MAX_FOLDER_ENTRIES,
  MAX_MEMO_BYTES,
  type MemoEdges,
  memoPath,
  RECALL_WAIT_MS,
} from "../../src/plan/listing-memo.ts";
import { type ProbeEnv, probeHardware, type RunResult } from "../../src/plan/probe.ts";
import { ProbeAhead } from "../../src/plan/probe-ahead.ts";

const GIB = 2 ** 30;
const BINARY = "/opt/llama/bin/llama-server";
const DATA = "/data";
// llama-server --list-devices of a CPU build (test/fixtures/llama-server/transcripts/84).
const NONE = "Available devices:\n  (none)\n";
const VULKAN = "Available devices:\n  Vulkan0: AMD Radeon RX 7600 (8176 MiB, 7900 MiB free)\n";

type Stat = { size: number; mtimeMs: number; ino: number };

/** An in-memory machine: the binary's folder, the memo file, timers held for the test to fire. */
function machine() {
  const files = new Map<string, Stat>([
    [BINARY, { size: 100, mtimeMs: 1, ino: 10 }],
    ["/opt/llama/bin/libggml-cpu-haswell.so", { size: 200, mtimeMs: 1, ino: 11 }],
    ["/opt/llama/bin/libllama.so", { size: 300, mtimeMs: 1, ino: 12 }],
  ]);
  const state = {
    names: ["llama-server", "libggml-cpu-haswell.so", "libllama.so", "README.md"],
    memo: null as string | null,
    memoKind: "file" as "file" | "link" | "fifo",
    boot: "boot-a",
    env: { PATH: "/usr/bin", CUDA_VISIBLE_DEVICES: "0" } as Record<string, string>,
    platform: "linux",
    timers: [] as { fn: () => void; ms: number }[],
    infos: [] as string[],
    writes: 0,
    hangRead: false,
    failWrite: false,
  };
  const edges: MemoEdges = {
    get platform() {
      return state.platform;
    },
    arch: "x64",
    realpath: async (p) => p,
    stat: async (p) => {
      const s = files.get(p);
      if (!s) throw Object.assign(new Error(`ENOENT ${p}`), { code: "ENOENT" });
      return s;
    },
    names: async (_dir, max) => (state.names.length > max ? null : [...state.names]),
    boot: async () => state.boot,
    env: () => ({ ...state.env }),
    read: async (p, max) => {
      if (state.hangRead) return new Promise<string | null>(() => {});
      expect(p).toBe(memoPath(DATA));
      if (state.memo === null) return null;
      if (state.memoKind !== "file") throw new Error(`ELOOP or not a file: ${state.memoKind}`);
      if (state.memo.length > max) throw new Error("too large");
      return state.memo;
    },
    write: async (dir, text) => {
      expect(dir).toBe(DATA);
      if (state.failWrite) throw new Error("EIO: the share is gone");
      state.writes++;
      state.memo = text;
      state.memoKind = "file";
    },
    remove: async () => {
      state.memo = null;
    },
    setTimer: (fn, ms) => {
      state.timers.push({ fn, ms });
    },
    info: (m) => {
      state.infos.push(m);
    },
  };
  return { files, state, edges };
}

function probeEnv(listing: () => string) {
  const calls: string[][] = [];
  const env: ProbeEnv = {
    platform: "linux",
    arch: "x64",
    run: async (cmd, args): Promise<RunResult> => {
      calls.push([cmd, ...args]);
      return cmd === BINARY ? { kind: "exit", code: 0, stdout: listing(), stderr: "" } : { kind: "absent" };
    },
    readText: async (path) =>
      path === "/proc/meminfo" ? "MemTotal: 32768000 kB\nMemAvailable: 20000000 kB\n" : null,
    cpus: () => [{ model: "Fake CPU" }],
    totalmem: () => 32 * GIB,
    freemem: () => 4 * GIB,
    now: () => 0,
  };
  const listed = () => calls.filter((c) => c[0] === BINARY).length;
  return { env, listed };
}

function setup(listing = () => NONE) {
  const m = machine();
  const p = probeEnv(listing);
  const rechecks: string[] = [];
  // A short wait for the memo's read: the dead-share test waits it out.
  const memo = new ListingMemo(m.edges, (b) => rechecks.push(b), 5);
  memo.serve(DATA, () => false);
  const probe = (ask = false) => probeHardware(p.env, BINARY, memo.hooks(ask));
  return { ...m, ...p, memo, probe, rechecks };
}

describe("the listing memo (a CPU build's (none) across core starts)", () => {
  test("a memo hit skips the --list-devices run", async () => {
    const s = setup();
    await s.probe();
    expect(s.listed()).toBe(1);
    expect(s.state.memo).toContain('"devices":"none"');
    const second = await s.probe();
    expect(s.listed()).toBe(1);
    expect(second.gpus).toEqual([]);
    expect(second.probes.find((r) => r.id === "llama-server")?.status).toBe("ok");
  });

  test("not served (local-ai plan, doctor from the CLI): always asked, nothing written", async () => {
    const m = machine();
    const p = probeEnv(() => NONE);
    const memo = new ListingMemo(m.edges, () => {});
    await probeHardware(p.env, BINARY, memo.hooks(false));
    await probeHardware(p.env, BINARY, memo.hooks(false));
    expect(p.listed()).toBe(2);
    expect(m.state.writes).toBe(0);
  });

  test("a stopping core neither reads nor writes the memo: it asks", async () => {
    const s = setup();
    await s.probe();
    s.memo.serve(DATA, () => true);
    s.state.memo = null;
    await s.probe();
    expect(s.listed()).toBe(2);
    expect(s.state.writes).toBe(1);
    expect(s.state.memo).toBeNull();
  });

  test("a GPU machine's probes touch no memo file: nothing to remove where none was", async () => {
    const s = setup(() => VULKAN);
    let removes = 0;
    s.edges.remove = async () => {
      removes++;
    };
    await s.probe();
    await s.probe();
    expect(removes).toBe(0);
    expect(s.state.writes).toBe(0);
  });

  test("a plan on the memo's answer says so in the listing's report", async () => {
    const s = setup();
    const first = await s.probe();
    expect(first.probes.find((r) => r.id === "llama-server")?.message).toBe(
      "llama-server lists no GPU device",
    );
    const second = await s.probe();
    expect(second.probes.find((r) => r.id === "llama-server")?.message).toContain(
      "remembered from an earlier start",
    );
  });

  test("a core that began stopping while the binary was asked writes no memo", async () => {
    let stopping = false;
    const m = machine();
    const p = probeEnv(() => {
      // The host's shutdown came while --list-devices ran: its data_dir may be removed next.
      stopping = true;
      return NONE;
    });
    const memo = new ListingMemo(m.edges, () => {});
    memo.serve(DATA, () => stopping);
    await probeHardware(p.env, BINARY, memo.hooks(false));
    expect(p.listed()).toBe(1);
    expect(m.state.writes).toBe(0);
  });

  const changes: [string, (s: ReturnType<typeof setup>) => void][] = [
    ["the binary's size", (s) => s.files.set(BINARY, { size: 101, mtimeMs: 1, ino: 10 })],
    ["the binary's mtime", (s) => s.files.set(BINARY, { size: 100, mtimeMs: 2, ino: 10 })],
    ["the binary's inode", (s) => s.files.set(BINARY, { size: 100, mtimeMs: 1, ino: 99 })],
    [
      "a backend library's mtime",
      (s) => s.files.set("/opt/llama/bin/libggml-cpu-haswell.so", { size: 200, mtimeMs: 5, ino: 11 }),
    ],
    [
      "a backend library added (ggml-vulkan)",
      (s) => {
        s.state.names.push("libggml-vulkan.so");
        s.files.set("/opt/llama/bin/libggml-vulkan.so", { size: 1, mtimeMs: 1, ino: 13 });
      },
    ],
    ["the boot", (s) => (s.state.boot = "boot-b")],
    ["CUDA_VISIBLE_DEVICES", (s) => (s.state.env.CUDA_VISIBLE_DEVICES = "1")],
    ["VK_ICD_FILENAMES set", (s) => (s.state.env.VK_ICD_FILENAMES = "/etc/vulkan/icd.d/radeon.json")],
    ["the OS", (s) => (s.state.platform = "darwin")],
  ];
  for (const [part, change] of changes) {
    test(`${part} changed: asked again`, async () => {
      const s = setup();
      await s.probe();
      change(s);
      await s.probe();
      expect(s.listed()).toBe(2);
      // Rewritten for the new key: the next probe is a hit.
      await s.probe();
      expect(s.listed()).toBe(2);
    });
  }

  test("a README's change is no key part; a folder past the bound is no memo", async () => {
    const s = setup();
    await s.probe();
    s.state.names.push("notes.txt");
    await s.probe();
    expect(s.listed()).toBe(1);
    s.state.names = Array.from({ length: MAX_FOLDER_ENTRIES + 1 }, (_, i) => `f${i}`);
    await s.probe();
    await s.probe();
    expect(s.listed()).toBe(3);
  });

  test("a log or a model beside the binary, rewritten at each start, is no key part", async () => {
    // Only what llama-server loads is: a name with "llama" in it is not (its --log-file, a lock,
    // a model being downloaded there). One rewritten at each start made a key no start met again.
    const s = setup();
    s.state.names.push("llama-server.log", "Llama-3.2-1B-Q4_K_M.gguf.part");
    s.files.set("/opt/llama/bin/llama-server.log", { size: 1, mtimeMs: 1, ino: 20 });
    s.files.set("/opt/llama/bin/Llama-3.2-1B-Q4_K_M.gguf.part", { size: 1, mtimeMs: 1, ino: 21 });
    await s.probe();
    s.files.set("/opt/llama/bin/llama-server.log", { size: 2, mtimeMs: 2, ino: 20 });
    s.files.set("/opt/llama/bin/Llama-3.2-1B-Q4_K_M.gguf.part", { size: 9, mtimeMs: 2, ino: 21 });
    await s.probe();
    expect(s.listed()).toBe(1);
  });

  test("a library beside the binary whose stat fails (a dangling link) still makes a key", async () => {
    // libvulkan.so.1 linked to a driver package since removed: the loader skips it as if absent.
    // Its failed stat threw the whole key away, and the memo never answered on that machine.
    const s = setup();
    s.state.names.push("libvulkan.so.1");
    await s.probe();
    await s.probe();
    expect(s.listed()).toBe(1);
    // The link's target installed: asked again.
    s.files.set("/opt/llama/bin/libvulkan.so.1", { size: 7, mtimeMs: 1, ino: 16 });
    await s.probe();
    expect(s.listed()).toBe(2);
  });

  test("a GPU runtime library added beside the binary (cudart64_12.dll): asked again", async () => {
    // llama.cpp's Windows CUDA release needs its cudart zip unpacked beside llama-server.exe:
    // without it ggml-cuda.dll fails to load and the listing says (none). Unpacked later, the
    // memo answered (none) on, and that boot's first loads planned a GPU machine on the CPU.
    const s = setup();
    await s.probe();
    s.state.names.push("cudart64_12.dll");
    s.files.set("/opt/llama/bin/cudart64_12.dll", { size: 5, mtimeMs: 1, ino: 14 });
    await s.probe();
    expect(s.listed()).toBe(2);
    // One replaced in place (a newer runtime unpacked over it) too.
    s.files.set("/opt/llama/bin/cudart64_12.dll", { size: 6, mtimeMs: 2, ino: 15 });
    await s.probe();
    expect(s.listed()).toBe(3);
    s.state.names.push("libvulkan.so.1");
    s.files.set("/opt/llama/bin/libvulkan.so.1", { size: 7, mtimeMs: 1, ino: 16 });
    await s.probe();
    expect(s.listed()).toBe(4);
  });

  test("the out-of-tree backend GGML_BACKEND_PATH names, rebuilt in place: asked again", async () => {
    // ggml loads the file GGML_BACKEND_PATH names besides its own backends
    // (ggml-backend-reg.cpp ggml_backend_load_all_from_path): one that failed to start gave
    // (none), and its fixed build at the same path met a memo whose key held.
    const s = setup();
    const plugin = "/home/u/ggml-npu/build/libggml-npu.so";
    s.state.env.GGML_BACKEND_PATH = plugin;
    s.files.set(plugin, { size: 50, mtimeMs: 1, ino: 30 });
    await s.probe();
    await s.probe();
    expect(s.listed()).toBe(1);
    s.files.set(plugin, { size: 51, mtimeMs: 2, ino: 30 });
    await s.probe();
    expect(s.listed()).toBe(2);
    // Not there at all: still a key (its absence), so a memo; made later, asked again.
    s.files.delete(plugin);
    await s.probe();
    await s.probe();
    expect(s.listed()).toBe(3);
    s.files.set(plugin, { size: 52, mtimeMs: 3, ino: 31 });
    await s.probe();
    expect(s.listed()).toBe(4);
  });

  test("a re-check whose listing fails drops the memo and says so, not that it lists devices", async () => {
    let text = NONE;
    const s = setup(() => text);
    await s.probe();
    // A hung GPU backend's crash (an exit, no device list) on the background re-check's ask.
    text = "ggml_vulkan: device lost\n";
    await s.probe(true);
    expect(s.state.memo).toBeNull();
    const said = s.state.infos.join("\n");
    expect(said).not.toContain("now lists no device list");
    expect(said).not.toContain("plans with them");
    expect(said).toContain("gave no device list where it listed none");
  });

  test("a listing with devices is never remembered, and removes a memo", async () => {
    let text = NONE;
    const s = setup(() => text);
    await s.probe();
    expect(s.state.memo).not.toBeNull();
    text = VULKAN;
    await s.probe(true);
    expect(s.state.memo).toBeNull();
    await s.probe();
    await s.probe();
    expect(s.listed()).toBe(4);
    expect(s.state.writes).toBe(1);
  });

  const bad: [string, (s: ReturnType<typeof setup>) => void][] = [
    ["corrupt", (s) => (s.state.memo = "{not json")],
    ["oversized", (s) => (s.state.memo = `${s.state.memo}${" ".repeat(MAX_MEMO_BYTES)}`)],
    ["a symbolic link", (s) => (s.state.memoKind = "link")],
    ["a FIFO", (s) => (s.state.memoKind = "fifo")],
    ["another version's", (s) => (s.state.memo = s.state.memo!.replace('"version":1', '"version":2'))],
  ];
  for (const [what, spoil] of bad) {
    test(`a memo file that is ${what} is ignored and replaced`, async () => {
      const s = setup();
      await s.probe();
      spoil(s);
      await s.probe();
      expect(s.listed()).toBe(2);
      expect(s.state.memoKind).toBe("file");
      expect(JSON.parse(s.state.memo!).version).toBe(1);
    });
  }

  test("a memo write that fails is only logged: the next start asks again", async () => {
    const s = setup();
    s.state.failWrite = true;
    await s.probe();
    await Bun.sleep(0);
    expect(s.state.memo).toBeNull();
    expect(s.state.infos.some((m) => m.includes("could not be written (EIO"))).toBe(true);
    await s.probe();
    expect(s.listed()).toBe(2);
  });

  test("a memo read that never answers (a dead share) is waited for a bounded time, then asked", async () => {
    expect(RECALL_WAIT_MS).toBeLessThanOrEqual(300);
    const s = setup();
    await s.probe();
    s.state.hangRead = true;
    const before = s.state.writes;
    await s.probe();
    expect(s.listed()).toBe(2);
    // Nothing written to a drive that does not answer.
    expect(s.state.writes).toBe(before);
  });

  test("a GGML_BACKEND_PATH file on a dead share: its stat is within the read's bound", async () => {
    const s = setup();
    s.state.env.GGML_BACKEND_PATH = "/mnt/share/libggml-npu.so";
    await s.probe();
    let stats = 0;
    const stat = s.edges.stat;
    s.edges.stat = (p) => {
      if (p !== "/mnt/share/libggml-npu.so") return stat(p);
      stats++;
      return new Promise(() => {});
    };
    await s.probe();
    await s.probe();
    // Asked each time, nothing written, and the hung stat not begun again.
    expect(s.listed()).toBe(3);
    expect(stats).toBe(1);
  });

  test("a late memo read is not begun again while it hangs: one stuck thread, not one a plan", async () => {
    // Each read of a dead share holds a thread of the runtime's pool until the share answers:
    // every plan after (each cold start, wake, restart, models' fit verdicts) held another, until
    // none was left for the core's other file work.
    const s = setup();
    await s.probe();
    let answer: (text: string | null) => void = () => {};
    let reads = 0;
    const read = s.edges.read;
    s.edges.read = () => {
      reads++;
      return new Promise<string | null>((resolve) => {
        answer = resolve;
      });
    };
    await s.probe();
    await s.probe();
    await s.probe();
    expect(reads).toBe(1);
    expect(s.listed()).toBe(4);
    // The share answers: the next probe reads it again (and the memo answers).
    s.edges.read = read;
    answer(null);
    // Its settling runs on microtasks, all of them run before a macrotask's turn.
    await new Promise((resolve) => setImmediate(resolve));
    await s.probe();
    expect(s.listed()).toBe(4);
  });

  test("a hit asks again once, RECHECK_AFTER_MS later; skipped while the core stops", async () => {
    const s = setup();
    await s.probe();
    await s.probe();
    await s.probe();
    expect(s.state.timers.length).toBe(1);
    s.state.timers[0]!.fn();
    expect(s.rechecks).toEqual([BINARY]);
    const m = machine();
    let stopping = false;
    const rechecks: string[] = [];
    const memo = new ListingMemo(m.edges, (b) => rechecks.push(b));
    memo.serve(DATA, () => stopping);
    const p = probeEnv(() => NONE);
    await probeHardware(p.env, BINARY, memo.hooks(false));
    await probeHardware(p.env, BINARY, memo.hooks(false));
    stopping = true;
    m.state.timers[0]!.fn();
    expect(rechecks).toEqual([]);
  });

  test("a re-check waiting behind a running probe starts none once the core began stopping", async () => {
    const m = machine();
    let stopping = false;
    const probed: boolean[] = [];
    let finish: () => void = () => {};
    const ahead: { probe?: ProbeAhead } = {};
    const memo = new ListingMemo(m.edges, (b, going) => ahead.probe!.recheck(b, going));
    memo.serve(DATA, () => stopping);
    const p = probeEnv(() => NONE);
    ahead.probe = new ProbeAhead(async (binary, ask) => {
      probed.push(ask);
      // The first: a plan's probe the test holds running (a second model's, a fit verdict's).
      if (probed.length === 3) await new Promise<void>((resolve) => (finish = resolve));
      return probeHardware(p.env, binary, memo.hooks(ask));
    });
    await ahead.probe.take(BINARY);
    await ahead.probe.take(BINARY); // a hit: the timer set
    const running = ahead.probe.take(BINARY);
    m.state.timers[0]!.fn(); // fired before the stop: waits behind the running probe
    stopping = true;
    finish();
    await running;
    await new Promise((resolve) => setImmediate(resolve));
    // No nvidia-smi, rocm-smi or --list-devices of a core that is stopping.
    expect(probed).toEqual([false, false, false]);
  });

  test("the recheck finds a GPU: memo removed, info logged, the next plan takes that probe", async () => {
    let text = NONE;
    const m = machine();
    const p = probeEnv(() => text);
    let now = 0;
    const ahead: { probe?: ProbeAhead } = {};
    const memo = new ListingMemo(m.edges, (b) => ahead.probe!.recheck(b));
    memo.serve(DATA, () => false);
    const probeAhead = new ProbeAhead(
      (binary, ask) => probeHardware(p.env, binary, memo.hooks(ask)),
      () => now,
    );
    ahead.probe = probeAhead;
    await probeAhead.take(BINARY);
    now += 60_000;
    expect((await probeAhead.take(BINARY)).gpus).toEqual([]);
    expect(p.listed()).toBe(1);
    // A Vulkan driver installed since, no reboot: no key part changed.
    text = VULKAN;
    now += 15_000;
    m.state.timers[0]!.fn();
    const next = await probeAhead.take(BINARY);
    expect(p.listed()).toBe(2);
    expect(next.gpus.map((g) => g.name)).toEqual(["AMD Radeon RX 7600"]);
    expect(m.state.memo).toBeNull();
    expect(m.state.infos.join("\n")).toContain("now lists devices (Vulkan0: AMD Radeon RX 7600)");
    // Later plans ask the binary: nothing remembered of a listing with devices.
    now += 60_000;
    await probeAhead.take(BINARY);
    expect(p.listed()).toBe(3);
  });

  test("doctor's look asks the binary even where the memo holds, and a probe made ahead on it", async () => {
    const m = machine();
    const p = probeEnv(() => NONE);
    const memo = new ListingMemo(m.edges, () => {});
    memo.serve(DATA, () => false);
    let now = 0;
    const answered = new WeakSet<object>();
    const probeAhead = new ProbeAhead(
      async (binary, ask) => {
        const hooks = memo.hooks(ask);
        const snapshot = await probeHardware(p.env, binary, hooks);
        if (hooks.answered) answered.add(snapshot);
        return snapshot;
      },
      () => now,
      (snapshot) => answered.has(snapshot),
    );
    // The first start: the memo is empty, the binary asked; doctor joins that answer.
    probeAhead.start(BINARY);
    await probeAhead.look(BINARY, true);
    expect(p.listed()).toBe(1);
    await probeAhead.take(BINARY);
    expect(p.listed()).toBe(1);
    // A later start: the memo answers the probe made ahead; doctor asks the binary after it.
    now += 60_000;
    probeAhead.start(BINARY);
    await probeAhead.look(BINARY);
    expect(p.listed()).toBe(1);
    await probeAhead.look(BINARY, true);
    expect(p.listed()).toBe(2);
  });
});

test("doctor's probe asks the binary (look with ask), never the memo's answer", async () => {
  const { defaultDoctorDeps } = await import("../../src/doctor/doctor.ts");
  const { probeAhead } = await import("../../src/models/local-plan-deps.ts");
  const look = spyOn(probeAhead, "look").mockImplementation(async () => ({}) as never);
  try {
    await defaultDoctorDeps.probe(BINARY);
    expect(look).toHaveBeenCalledWith(BINARY, true);
  } finally {
    look.mockRestore();
  }
});

// A memo write waits on its drive's check before it lands (listing-memo-fs.ts `write`, `going`
// asked after it). A listing that found devices meanwhile, having read the memo before the write
// landed (none there), removed nothing, and the late write left a stale "no devices" memo: the
// next starts planned a GPU machine on its CPU alone until a recheck. A write begun before a
// listing that wants the memo gone is dropped now.
test("a memo write landing after a listing that found devices is dropped", async () => {
  const s = setup();
  const land = writesHeld(s);
  const cpu = s.memo.hooks(false);
  const gpu = s.memo.hooks(false);
  const [readCpu, readGpu] = await Promise.all([cpu.recall(BINARY), gpu.recall(BINARY)]);
  cpu.learned(BINARY, readCpu, []); // its write waits on the drive
  gpu.learned(BINARY, readGpu, [{ name: "Vulkan0", description: "AMD Radeon RX 7600" } as never]);
  land();
  await new Promise((resolve) => setImmediate(resolve));
  expect(s.state.memo).toBeNull();
  // A write begun after that listing lands as before.
  const later = s.memo.hooks(false);
  later.learned(BINARY, await later.recall(BINARY), []);
  await new Promise((resolve) => setImmediate(resolve));
  expect(s.state.memo).toContain('"devices":"none"');
});

// The same with a listing whose recall had no key (its memo read late, or the binary's identity
// unread: `NO_MEMO`): it returned before the counter was bumped, and the late "none" write still
// landed, a stale "no devices" memo planning a GPU machine on its CPU alone.
test("a listing with no key that found devices drops a memo write begun before it", async () => {
  const s = setup();
  const land = writesHeld(s);
  const cpu = s.memo.hooks(false);
  cpu.learned(BINARY, await cpu.recall(BINARY), []);
  const gpu = s.memo.hooks(false);
  const unkeyed = { hit: false, held: false, key: null };
  gpu.learned(BINARY, unkeyed as never, [{ name: "Vulkan0", description: "AMD Radeon RX 7600" } as never]);
  land();
  await new Promise((resolve) => setImmediate(resolve));
  expect(s.state.memo).toBeNull();
});

/** Memo writes held on their drive's check (listing-memo-fs.ts asks it first) until `land()`. */
function writesHeld(s: ReturnType<typeof setup>): () => void {
  let land = () => {};
  const drive = new Promise<void>((resolve) => {
    land = resolve;
  });
  const write = s.edges.write;
  s.edges.write = async (dir, text, going) => {
    await drive;
    if (going()) await write(dir, text, going);
  };
  return () => land();
}

// A listing that read the memo absent while another's "none" write was on its way, that write
// landing before this listing found devices: it skipped the removal (nothing was there when it
// read), and the stale "none" planned a GPU machine on its CPU alone until the 15 s recheck.
test("a listing that found devices removes a memo written after it read none", async () => {
  const s = setup();
  const gpu = s.memo.hooks(false);
  const readGpu = await gpu.recall(BINARY);
  expect(readGpu.present).toBe(false);
  const cpu = s.memo.hooks(false);
  cpu.learned(BINARY, await cpu.recall(BINARY), []);
  await new Promise((resolve) => setImmediate(resolve));
  expect(s.state.memo).toContain('"devices":"none"');
  gpu.learned(BINARY, readGpu, [{ name: "Vulkan0", description: "AMD Radeon RX 7600" } as never]);
  await new Promise((resolve) => setImmediate(resolve));
  expect(s.state.memo).toBeNull();
});

test("the same with a listing whose recall had no key (its read late, the binary unread)", async () => {
  const s = setup();
  const cpu = s.memo.hooks(false);
  cpu.learned(BINARY, await cpu.recall(BINARY), []);
  await new Promise((resolve) => setImmediate(resolve));
  expect(s.state.memo).toContain('"devices":"none"');
  const gpu = s.memo.hooks(false);
  const unkeyed = { hit: false, held: false, key: null };
  gpu.learned(BINARY, unkeyed as never, [{ name: "Vulkan0", description: "AMD Radeon RX 7600" } as never]);
  await new Promise((resolve) => setImmediate(resolve));
  expect(s.state.memo).toBeNull();
});
