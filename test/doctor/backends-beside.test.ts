import { expect, test } from "bun:test";
import { backendsBeside } from "../../src/doctor/checks.ts";
import { DriveAnswers } from "../../src/util/drive-answers.ts";

// Doctor lists the binary's folder for its backends, waited for no longer than a stat: on an NFS
// folder whose stat answered from cached attributes, the listing hangs and holds one of the
// runtime's file threads until the share is back. Each doctor (a host that retries) left another
// one hanging, until every file read and write of the core waited with them. The stand-in is a
// listing that never answers, as a hard-mounted share's does not.
test("a folder's listing that hangs is not asked again while it is out", async () => {
  const asked: string[] = [];
  const hung = (folder: string) => {
    asked.push(folder);
    return new Promise<string[]>(() => {});
  };
  const answers = new DriveAnswers({ statWaitMs: 0 });
  expect(await backendsBeside("/mnt/share/bin/llama-server", hung, answers)).toEqual(new Set());
  expect(await backendsBeside("/mnt/share/bin/llama-server", hung, answers)).toEqual(new Set());
  expect(asked).toEqual(["/mnt/share/bin"]);
});

test("a listing that answered is asked afresh the next time", async () => {
  const list = async () => ["libggml-cuda.so", "libggml-base.so"];
  const answers = new DriveAnswers({ statWaitMs: 1000 });
  expect(await backendsBeside("/opt/llama/llama-server", list, answers)).toEqual(new Set(["CUDA"]));
  expect(await backendsBeside("/opt/llama/llama-server", async () => [], answers)).toEqual(new Set());
});

// Listings of several folders on one dead share (binaries a host tried in turn) each held a file
// thread for good when started outside the drives' lanes (util/drive-answers.ts `laned`).
test("listings of other folders wait for the lanes a hung one holds, not started beside it", async () => {
  const asked: string[] = [];
  const hung = (folder: string) => {
    asked.push(folder);
    return new Promise<string[]>(() => {});
  };
  const answers = new DriveAnswers({ statWaitMs: 2, lanes: 1 });
  expect(await backendsBeside("/mnt/dead/a/llama-server", hung, answers)).toEqual(new Set());
  expect(await backendsBeside("/mnt/dead/b/llama-server", hung, answers)).toEqual(new Set());
  expect(asked).toEqual(["/mnt/dead/a"]);
});
