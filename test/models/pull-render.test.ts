import { describe, expect, test } from "bun:test";
import {
  humanBytes,
  humanSeconds,
  ProgressPrinter,
  progressBar,
  progressLine,
  renderPulled,
} from "../../src/models/pull-render.ts";
import type { DownloadProgress } from "../../src/protocol/pull.ts";

const MIB = 1024 * 1024;
const p = (o: Partial<DownloadProgress> = {}): DownloadProgress => ({
  file: "sub/model-Q4_K_M.gguf",
  part: 1,
  parts: 1,
  phase: "download",
  bytes_done: 420 * MIB,
  total: 1000 * MIB,
  bytes_per_s: 12.3 * MIB,
  eta_s: 47,
  ...o,
});

describe("what local-ai pull prints", () => {
  test("a plain line names the file, percent, sizes, rate and ETA", () => {
    expect(progressLine(p())).toBe("model-Q4_K_M.gguf  42.0%  420.0 MiB / 1000.0 MiB  12.3 MiB/s  ETA 00:47");
    expect(progressLine(p({ phase: "wait", part: 2, parts: 3, eta_s: null }))).toBe(
      "waiting for another pull model-Q4_K_M.gguf (2/3)  42.0%  420.0 MiB / 1000.0 MiB  12.3 MiB/s  ETA --:--",
    );
    expect(progressLine(p({ phase: "check" }))).toBe(
      "verifying model-Q4_K_M.gguf  42.0%  420.0 MiB / 1000.0 MiB",
    );
  });

  test("the bar fits the terminal's width", () => {
    for (const width of [40, 80, 200]) {
      const bar = progressBar(p(), width);
      expect(bar.length).toBeLessThan(width);
      expect(bar).toMatch(/\[#+-+\]/);
    }
    expect(progressBar(p({ bytes_done: 1000 * MIB }), 80)).not.toContain("-]");
    // A narrow terminal, and a name of wide characters: never as wide as the terminal (it would wrap).
    for (const width of [8, 15, 20, 30]) {
      for (const file of ["org/x/model-Q4_K_M.gguf", "org/x/模型文件名称很长的模型-Q4_K_M.gguf"]) {
        const bar = progressBar(p({ file }), width);
        expect(Bun.stringWidth(bar)).toBeLessThan(width);
        expect(bar.isWellFormed()).toBe(true);
      }
    }
  });

  test("on a terminal the bar is redrawn in place; a new file or phase starts a new line", () => {
    let out = "";
    const printer = new ProgressPrinter((t) => (out += t), { columns: 80 });
    printer.show(p({ bytes_done: 0 }));
    printer.show(p());
    printer.show(p({ phase: "check" }));
    printer.end();
    expect(out.split("\r").length - 1).toBe(3);
    expect(out.match(/\n/g)?.length).toBe(2);
    expect(out).toContain("\x1b[K");
  });

  test("without a terminal: a plain line every 2 s, at each phase change, and at the end", () => {
    let now = 0;
    const lines: string[] = [];
    const printer = new ProgressPrinter(
      (t) => lines.push(t),
      null,
      () => now,
    );
    for (now = 0; now < 5000; now += 250) printer.show(p({ bytes_done: now * 1000 }));
    expect(lines).toHaveLength(3); // t = 0, 2000, 4000
    printer.show(p({ phase: "check" }));
    printer.show(p({ bytes_done: 1000 * MIB, total: 1000 * MIB }));
    expect(lines).toHaveLength(5);
    expect(lines.every((l) => l.endsWith("\n") && !l.includes("\r"))).toBe(true);
  });

  test("a file name from the hub cannot drive the terminal: C1 controls and bidi overrides are escaped", () => {
    // The listing refuses C0 controls, not U+009B (a CSI as ESC [ is) nor U+202E: the bar, the
    // plain line and the result wrote the hub's name as it came.
    const file = "org/x/m-\u009b2J\u202egguf.exe-Q4_K_M.gguf";
    const shown = [progressBar(p({ file }), 200), progressLine(p({ file }))];
    let out = "";
    const printer = new ProgressPrinter((t) => (out += t), { columns: 200 });
    printer.show(p({ file }));
    shown.push(out);
    const path = `/c/models--org--m/snapshots/0123/${file}`;
    shown.push(
      renderPulled({
        repo: "org/m",
        revision: "main",
        commit: "0123456789abcdef0123456789abcdef01234567",
        path,
        size_bytes: 1,
        sha256: "aa",
        mmproj: path,
        files: [{ file, path, size_bytes: 1, sha256: "aa" }],
        cache_dir: "/c",
        warnings: [`${file}: the server ignored the Range request`],
        fit: {
          fits: null,
          message: "not read",
          needed_bytes: null,
          available_bytes: null,
          device: null,
          context_per_slot: null,
        },
      } as never),
    );
    for (const text of shown) {
      expect(text).not.toMatch(/[\u0080-\u009f\u202a-\u202e]/);
      expect(text).toContain("\\u{9b}2J");
    }
  });

  test("the result: what was pulled, each file's sha256, notes, the verdict, and the model.path line", () => {
    const text = renderPulled({
      repo: "org/m",
      revision: "main",
      commit: "0123456789abcdef0123456789abcdef01234567",
      path: "/c/models--org--m/snapshots/0123/m.gguf",
      size_bytes: 3 * MIB,
      sha256: "aa",
      mmproj: null,
      files: [
        {
          file: "m.gguf",
          path: "/c/models--org--m/snapshots/0123/m.gguf",
          size_bytes: 3 * MIB,
          sha256: "aa",
        },
      ],
      cache_dir: "/c",
      warnings: ["the server ignored the Range request"],
      fit: {
        fits: false,
        needed_bytes: 1,
        available_bytes: 0,
        device: "RAM",
        context_per_slot: 2048,
        message: "RAM needs more",
      },
    });
    expect(text).toBe(
      [
        "pulled org/m@main (0123456789ab): 3.0 MiB",
        "  /c/models--org--m/snapshots/0123/m.gguf",
        "    sha256 aa",
        "note: the server ignored the Range request",
        "fit: does not fit this machine: RAM needs more",
        "use it: model.path: /c/models--org--m/snapshots/0123/m.gguf",
        "",
      ].join("\n"),
    );
    expect(humanBytes(512)).toBe("512 B");
    expect(humanSeconds(3725)).toBe("1:02:05");
  });
});
