import { expect, test } from "bun:test";
import { backendsBeside } from "../../src/doctor/checks.ts";

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
  expect(await backendsBeside("/mnt/share/bin/llama-server", hung, 0)).toEqual(new Set());
  expect(await backendsBeside("/mnt/share/bin/llama-server", hung, 0)).toEqual(new Set());
  expect(asked).toEqual(["/mnt/share/bin"]);
});

test("a listing that answered is asked afresh the next time", async () => {
  const list = async () => ["libggml-cuda.so", "libggml-base.so"];
  expect(await backendsBeside("/opt/llama/llama-server", list, 1000)).toEqual(new Set(["CUDA"]));
  expect(await backendsBeside("/opt/llama/llama-server", async () => [], 1000)).toEqual(new Set());
});
