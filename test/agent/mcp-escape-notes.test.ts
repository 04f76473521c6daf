import { expect, test } from "bun:test";
import { closeSync, openSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { escapeNotes, NOTE_EVERY_MS } from "../../src/agent/mcp/child.ts";
import type { ProcEntry } from "../../src/platform/process-tree.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

const escaped = (pid: number): ProcEntry => ({ pid, ppid: 1, pgid: pid, start: String(1000 + pid) });

test("what the core told the guard holds only what the last look found: a process per call does not grow it", () => {
  using dir = tmpdir();
  const path = join(dir.path, "guard-socket");
  const fd = openSync(path, "w");
  const told = new Set<string>();
  let clock = 0;
  // Each look finds one long-lived process and the one the last call started (earlier ones gone).
  let found: ProcEntry[] = [];
  const note = escapeNotes(
    fd,
    () => found,
    () => false,
    told,
    () => clock,
  );
  for (let call = 0; call < 200; call++) {
    found = [escaped(7), escaped(100 + call)];
    note();
    clock += NOTE_EVERY_MS;
  }
  closeSync(fd);
  expect(told.size).toBe(2);
  const lines = readFileSync(path, "utf8").trim().split("\n");
  // Each told once, the long-lived one too.
  expect(lines.length).toBe(201);
  expect(new Set(lines).size).toBe(201);
  expect(lines.filter((l) => l === "7:1007")).toHaveLength(1);
});
