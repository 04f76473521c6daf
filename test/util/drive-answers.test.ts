import { describe, expect, jest, test } from "bun:test";
import { DriveAnswers, statLanes } from "../../src/util/drive-answers.ts";

// Each stat out holds one of the runtime's file threads until it answers (as many as cores, 2 at
// least): a host asking one dead path per request took them all, and every file read of the
// core waited with them. At most `lanes` are out; past that a path queues, or is refused at once
// while every lane hangs.

/** A stat per path, answered when the test says. */
function fakeStat() {
  const asked: string[] = [];
  const answers = new Map<string, () => void>();
  const stat = (path: string) => {
    asked.push(path);
    return new Promise((resolve) => answers.set(path, () => resolve({ ino: 1, size: 0, mtimeMs: 0 })));
  };
  return { asked, stat, answer: (path: string) => answers.get(path)?.() };
}

describe("DriveAnswers: the stats out at once", () => {
  test("every lane held by a stat that hangs: a new path is refused at once, not asked", async () => {
    const fake = fakeStat();
    const drives = new DriveAnswers({ stat: fake.stat, statWaitMs: 1, lanes: 2 });
    expect(await drives.statOf("/mnt/dead/a.gguf")).toBe("late");
    expect(await drives.statOf("/mnt/dead/b.gguf")).toBe("late");
    expect(await drives.statOf("/mnt/dead/c.gguf")).toBe("late");
    expect(await drives.answers("/home/u/near.gguf")).toBe(false);
    expect(fake.asked).toEqual(["/mnt/dead/a.gguf", "/mnt/dead/b.gguf"]);
    // One of them answers at last: its lane is free again.
    fake.answer("/mnt/dead/a.gguf");
    expect(await drives.statOf("/mnt/dead/a.gguf")).toMatchObject({ ino: 1 });
    void drives.statOf("/home/u/near.gguf");
    while (!fake.asked.includes("/home/u/near.gguf")) await Promise.resolve();
    fake.answer("/home/u/near.gguf");
    expect(await drives.statOf("/home/u/near.gguf")).toMatchObject({ ino: 1 });
  });

  test("past the lanes a path waits for one, and is asked once a stat before it answers", async () => {
    const fake = fakeStat();
    const drives = new DriveAnswers({ stat: fake.stat, statWaitMs: 60_000, lanes: 1 });
    const first = drives.statOf("/models/a.gguf");
    const second = drives.statOf("/models/b.gguf");
    await Promise.resolve();
    expect(fake.asked).toEqual(["/models/a.gguf"]);
    fake.answer("/models/a.gguf");
    expect(await first).toMatchObject({ ino: 1 });
    while (fake.asked.length < 2) await Promise.resolve(); // b takes the lane a gave back
    expect(fake.asked).toEqual(["/models/a.gguf", "/models/b.gguf"]);
    fake.answer("/models/b.gguf");
    expect(await second).toMatchObject({ ino: 1 });
  });

  test("queued while every lane comes to hang: answered late, never asked", async () => {
    const fake = fakeStat();
    const drives = new DriveAnswers({ stat: fake.stat, statWaitMs: 1, lanes: 1 });
    const dead = drives.statOf("/mnt/dead/a.gguf");
    const queued = drives.statOf("/models/b.gguf");
    expect(await dead).toBe("late");
    expect(await queued).toBe("late");
    expect(await drives.statOf("/models/c.gguf")).toBe("late");
    expect(fake.asked).toEqual(["/mnt/dead/a.gguf"]);
  });

  test("a stat is judged hung by its own time out, not by the time it queued before it", async () => {
    // b waits behind a slow a (a disk spinning up) and is asked 900 ms into its 1 s: its caller's
    // wait ends 100 ms later, but its drive has not had the wait yet, and no path is refused for it.
    const fake = fakeStat();
    const drives = new DriveAnswers({ stat: fake.stat, statWaitMs: 1000, lanes: 1 });
    const turns = async () => {
      for (let i = 0; i < 10; i++) await Promise.resolve();
    };
    jest.useFakeTimers();
    try {
      const a = drives.statOf("/usb/a.gguf");
      const b = drives.statOf("/usb2/b.gguf");
      await turns();
      jest.advanceTimersByTime(900);
      fake.answer("/usb/a.gguf");
      expect(await a).toMatchObject({ ino: 1 });
      await turns();
      expect(fake.asked).toEqual(["/usb/a.gguf", "/usb2/b.gguf"]);
      jest.advanceTimersByTime(100);
      expect(await b).toBe("late");
      // b has hung 100 ms of its 1 s: c waits for the lane, it is not refused unasked.
      let answered = false;
      const c = drives.statOf("/home/u/c.gguf").finally(() => {
        answered = true;
      });
      await turns();
      expect(answered).toBe(false);
      // b hangs its whole second: now every lane hangs, and c, still queued, is late unasked.
      jest.advanceTimersByTime(900);
      expect(await c).toBe("late");
      expect(fake.asked).toEqual(["/usb/a.gguf", "/usb2/b.gguf"]);
      expect(await drives.statOf("/home/u/d.gguf")).toBe("late");
    } finally {
      jest.useRealTimers();
    }
  });

  test("a wait that ends while its path still queues: the path was not asked", async () => {
    // model_missing and modelGone say a drive did not answer only where its path was asked.
    const fake = fakeStat();
    const drives = new DriveAnswers({ stat: fake.stat, statWaitMs: 1000, lanes: 1 });
    jest.useFakeTimers();
    try {
      const first = drives.statOf("/models/a.gguf");
      void drives.statOf("/usb/b.gguf");
      const queued = drives.statOf("/models/c.gguf");
      await Promise.resolve();
      jest.advanceTimersByTime(900);
      fake.answer("/models/a.gguf");
      expect(await first).toMatchObject({ ino: 1 });
      jest.advanceTimersByTime(100);
      // b has had 100 ms of its own 1 s; c's caller waited its second, c never had a lane.
      expect(await queued).toBe("late");
      expect(fake.asked).toEqual(["/models/a.gguf", "/usb/b.gguf"]);
      expect(drives.asking("/models/c.gguf")).toBe(false);
      expect(drives.asking("/usb/b.gguf")).toBe(true);
    } finally {
      jest.useRealTimers();
    }
  });

  test("as many lanes as the runtime's file threads, less one", () => {
    expect(statLanes({}, 2)).toBe(1);
    expect(statLanes({}, 1)).toBe(1);
    expect(statLanes({}, 8)).toBe(7);
    expect(statLanes({ UV_THREADPOOL_SIZE: "16" }, 2)).toBe(15);
  });

  test("the runtime's own reading of its environment: GOMAXPROCS after UV_THREADPOOL_SIZE, 2 at least", () => {
    // Bun sizes its file threads by the first of these that names 2 or more, else the cores:
    // GOMAXPROCS=2 on 16 cores is 2 threads, and 15 stats out would hold both.
    expect(statLanes({ GOMAXPROCS: "2" }, 16)).toBe(1);
    expect(statLanes({ UV_THREADPOOL_SIZE: "3", GOMAXPROCS: "6" }, 2)).toBe(2);
    // One names fewer than 2: Bun passes over it to the next.
    expect(statLanes({ UV_THREADPOOL_SIZE: "1", GOMAXPROCS: "4" }, 2)).toBe(3);
    expect(statLanes({ UV_THREADPOOL_SIZE: "1" }, 8)).toBe(7);
    expect(statLanes({ GOMAXPROCS: "x" }, 4)).toBe(3);
  });

  test("a value the runtime does not read as a whole number is passed over as it passes it over", () => {
    // Bun reads "3.5", "3x" or "4e0" as no number (measured: 2 threads on 2 cores), where a
    // lenient parse took 3 or 4: as many stats out as threads, every file read waited on them.
    expect(statLanes({ GOMAXPROCS: "3.5" }, 2)).toBe(1);
    expect(statLanes({ GOMAXPROCS: "3x" }, 2)).toBe(1);
    expect(statLanes({ GOMAXPROCS: "4e0" }, 2)).toBe(1);
    expect(statLanes({ UV_THREADPOOL_SIZE: "3x", GOMAXPROCS: "6" }, 2)).toBe(5);
    // What it does read: spaces around, a plus, underscores between digits (Zig's integers).
    expect(statLanes({ GOMAXPROCS: " 4 " }, 2)).toBe(3);
    expect(statLanes({ GOMAXPROCS: "+4" }, 2)).toBe(3);
    expect(statLanes({ GOMAXPROCS: "0_4" }, 2)).toBe(3);
    expect(statLanes({ GOMAXPROCS: "4_" }, 2)).toBe(1);
  });

  test("what Bun passes over or caps is passed over or capped: its 16 bits, its 1024 threads, its spaces", async () => {
    // Measured on bun 1.4.5 (its pool's threads counted): a count past 65,535 is no number there
    // (2 threads on 2 cores), 2,000 or 65,535 are 1,024 threads, and only ASCII space, tab, CR,
    // LF and form feed are trimmed (a no-break space or a vertical tab: no number).
    expect(statLanes({ GOMAXPROCS: "99999999999" }, 2)).toBe(1);
    expect(statLanes({ GOMAXPROCS: "65536" }, 2)).toBe(1);
    expect(statLanes({ UV_THREADPOOL_SIZE: "70000", GOMAXPROCS: "4" }, 2)).toBe(3);
    expect(statLanes({ GOMAXPROCS: "65535" }, 2)).toBe(1023);
    expect(statLanes({ GOMAXPROCS: "2000" }, 2)).toBe(1023);
    expect(statLanes({ GOMAXPROCS: "\u00a04" }, 2)).toBe(1);
    expect(statLanes({ GOMAXPROCS: "\v4" }, 2)).toBe(1);
    expect(statLanes({ GOMAXPROCS: "\t4\r\n" }, 2)).toBe(3);
    expect(statLanes({ GOMAXPROCS: "\f4" }, 2)).toBe(3);
  });
});
