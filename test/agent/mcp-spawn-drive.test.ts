import { expect, test } from "bun:test";
import { basename, dirname } from "node:path";
import { spawnWhenAnswered } from "../../src/agent/mcp/child.ts";
import { DriveAnswers } from "../../src/util/drive-answers.ts";
import { deadDrive } from "../fixtures/dead-drive.ts";

// An MCP server's start stat'ed its configured cwd (and the shell looked its command up) with
// synchronous calls on the core's loop: a cwd or command on a network share gone offline held the
// whole core (ping, cancel, every chat) for as long as the share hung, for good on a hard mount,
// at every chat that started that server. Both are now asked of the drive off the loop first.
test("a server whose cwd's drive does not answer is not spawned: its start fails, naming why", async () => {
  const asked: (string | Buffer)[] = [];
  const launch = { command: "/mnt/share/bin/server", args: [], env: {}, cwd: "/mnt/share/work" };
  await expect(spawnWhenAnswered(launch, undefined, deadDrive(asked))).rejects.toThrow(
    "its cwd /mnt/share/work: its drive did not answer within 0 s (a network drive offline?)",
  );
  expect(asked).toEqual(["/mnt/share/work"]);
});

test("a server whose command's drive does not answer is not spawned either", async () => {
  const asked: (string | Buffer)[] = [];
  const launch = { command: "bin/server", args: [], env: {}, cwd: "/mnt/share/work" };
  await expect(spawnWhenAnswered(launch, undefined, deadDrive(asked, ["/mnt/share/work"]))).rejects.toThrow(
    "its command /mnt/share/work/bin/server: its drive did not answer",
  );
  expect(asked).toEqual(["/mnt/share/work/bin/server"]);
});

test("a start the pool closed while its drives were asked spawns nothing", async () => {
  const closed = new AbortController();
  closed.abort(new Error("the pool closed"));
  const launch = { command: process.execPath, args: [], env: {} };
  await expect(spawnWhenAnswered(launch, closed.signal, deadDrive([], [process.execPath]))).rejects.toThrow(
    "the pool closed",
  );
});

// Windows names a command's path with backslashes (C:\tools\server.exe, .\server.exe): only a "/"
// was taken for a path, so such a command on a share gone offline was never asked of its drive,
// and the spawn's synchronous lookup held the whole core as before.
test("on Windows, a command named by a path with backslashes is asked of its drive too", async () => {
  const asked: (string | Buffer)[] = [];
  const launch = { command: "Z:\\tools\\server.exe", args: [], env: {} };
  await expect(spawnWhenAnswered(launch, undefined, deadDrive(asked), "win32")).rejects.toThrow(
    "its command Z:\\tools\\server.exe: its drive did not answer",
  );
  expect(asked).toEqual(["Z:\\tools\\server.exe"]);
  const relative = { command: ".\\server.exe", args: [], env: {}, cwd: "Z:\\work" };
  const answering = deadDrive([], ["Z:\\work"]);
  await expect(spawnWhenAnswered(relative, undefined, answering, "win32")).rejects.toThrow(
    "its command Z:\\work\\server.exe: its drive did not answer",
  );
});

// A bare command was looked up on the server's PATH by Bun.which, synchronously, on the core's
// loop: a PATH folder on a share gone offline (a tools folder on a network home) held the whole
// core at the server's start, ping and cancel too.
test("a bare command whose PATH folder's drive does not answer is not spawned, naming the folder", async () => {
  const asked: (string | Buffer)[] = [];
  const launch = { command: "server", args: [], env: { PATH: "/mnt/share/bin:/usr/bin" } };
  await expect(spawnWhenAnswered(launch, undefined, deadDrive(asked), "linux")).rejects.toThrow(
    "its command server, looked for in /mnt/share/bin: its drive did not answer",
  );
  expect(asked).toEqual(["/mnt/share/bin/server"]);
});

test("a bare command found before a dead PATH folder is started: that folder is never asked", async () => {
  const asked: (string | Buffer)[] = [];
  const closed = new AbortController();
  closed.abort(new Error("stopped before the spawn"));
  const command = basename(process.execPath);
  const launch = { command, args: [], env: { PATH: `${dirname(process.execPath)}:/mnt/share/bin` } };
  const drive = deadDrive(asked, [process.execPath]);
  await expect(spawnWhenAnswered(launch, closed.signal, drive, "linux")).rejects.toThrow(
    "stopped before the spawn",
  );
  expect(asked).toEqual([]);
});

// Each PATH folder is asked in turn, up to a stat's wait each on a sleeping or dead drive: a
// start the pool closed (a cancelled chat, a shutdown) went on asking every folder after it.
test("a start the pool closed while a PATH folder was asked asks no folder after it", async () => {
  const { asked, closed, drive } = closingOnFirstStat();
  const launch = { command: "server", args: [], env: { PATH: "/a:/b:/c" } };
  await expect(spawnWhenAnswered(launch, closed.signal, drive, "linux")).rejects.toThrow("the pool closed");
  expect(asked).toEqual(["/a/server"]);
});

// The cwd's drive, then the command's, each up to a stat's wait: a start the pool closed while
// the cwd's was asked went on to ask the command's, as the PATH folders were.
test("a start the pool closed while its cwd was asked does not ask its command's drive", async () => {
  const { asked, closed, drive } = closingOnFirstStat();
  const launch = { command: "/mnt/tools/server", args: [], env: {}, cwd: "/mnt/share/work" };
  await expect(spawnWhenAnswered(launch, closed.signal, drive, "linux")).rejects.toThrow("the pool closed");
  expect(asked).toEqual(["/mnt/share/work"]);
});

/** A drive whose every stat answers "no file" and closes the pool as the first is asked. */
function closingOnFirstStat() {
  const asked: string[] = [];
  const closed = new AbortController();
  const stat = (path: string | Buffer) => {
    asked.push(String(path));
    closed.abort(new Error("the pool closed"));
    return Promise.resolve(null);
  };
  return { asked, closed, drive: new DriveAnswers({ stat, statWaitMs: 1000 }) };
}
