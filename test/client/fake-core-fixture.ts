import { expect } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { LocalAiClient, type LocalAiClientOptions, LocalAiError } from "../../src/client/index.ts";

// The client against a scripted stand-in core (fake-core.mjs), shared by the tests that drive it.
export const FAKE = join(import.meta.dir, "fake-core.mjs");
const clients: LocalAiClient[] = [];

export function options(
  extra: Partial<LocalAiClientOptions> = {},
  env: Record<string, string> = {},
): LocalAiClientOptions {
  return {
    binary: process.execPath,
    args: [FAKE],
    env: { ...process.env, ...env },
    ...extra,
  };
}

/** Starts a client on the fake core; killFakes() (afterEach) kills it. */
export async function startFake(extra: Partial<LocalAiClientOptions> = {}, env: Record<string, string> = {}) {
  const client = await LocalAiClient.start(options(extra, env));
  clients.push(client);
  return client;
}

/** Kills the cores of every client startFake() or track() handed out. */
export function killFakes(): void {
  for (const c of clients.splice(0)) c.kill();
}

/** Has killFakes() kill a client started some other way. */
export function track<C extends LocalAiClient>(client: C): C {
  clients.push(client);
  return client;
}

export async function rejection(p: Promise<unknown>): Promise<LocalAiError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(LocalAiError);
    return err as LocalAiError;
  }
  throw new Error("expected a rejection");
}

export async function pidWhenWritten(file: string): Promise<number> {
  const until = Date.now() + 5000;
  // Read until it holds a pid: a file seen between its creation and its write is empty, and
  // Number("") is 0, which process.kill takes for the whole process group (this test runner's).
  for (;;) {
    const pid = existsSync(file) ? Number(readFileSync(file, "utf8")) : 0;
    if (Number.isInteger(pid) && pid > 0) return pid;
    if (Date.now() > until) throw new Error(`${file} was never written`);
    await Bun.sleep(10);
  }
}

export function isAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) throw new Error(`not a process id: ${pid}`);
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
