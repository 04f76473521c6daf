import { expect, test } from "bun:test";
import { closeSync, openSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { escapeNotes, MAX_TOLD, NOTE_EVERY_MS } from "../../src/agent/mcp/child.ts";
import type { ProcEntry } from "../../src/platform/process-tree.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

const escaped = (pid: number): ProcEntry => ({ pid, ppid: 1, pgid: pid, start: String(1000 + pid) });

/** Each look's finds, in turn; what the guard's socket got, a line each. */
function noted(looks: ProcEntry[][], told: Map<string, true>): string[] {
  using dir = tmpdir();
  const path = join(dir.path, "guard-socket");
  const fd = openSync(path, "w");
  let clock = 0;
  let found: ProcEntry[] = [];
  const note = escapeNotes(
    fd,
    () => found,
    () => false,
    told,
    () => clock,
  );
  for (const look of looks) {
    found = look;
    note();
    clock += NOTE_EVERY_MS;
  }
  closeSync(fd);
  return readFileSync(path, "utf8").trim().split("\n");
}

test("what the core told the guard is bounded: a server starting a process per call does not grow it", () => {
  const told = new Map<string, true>();
  // Each look finds one long-lived process and the one the last call started (earlier ones gone).
  const calls = MAX_TOLD + 500;
  const lines = noted(
    Array.from({ length: calls }, (_, call) => [escaped(7), escaped(100 + call)]),
    told,
  );
  expect(told.size).toBe(MAX_TOLD);
  // Each told once, the long-lived one too: it stays among the newest.
  expect(lines.length).toBe(calls + 1);
  expect(new Set(lines).size).toBe(calls + 1);
  expect(lines.filter((l) => l === "7:1007")).toHaveLength(1);
});

test("a process one look missed (past the descendants read) is not told again when found again", () => {
  const lines = noted([[escaped(7), escaped(8)], [escaped(8)], [escaped(7), escaped(8)]], new Map());
  expect(lines).toEqual(["7:1007", "8:1008"]);
});
