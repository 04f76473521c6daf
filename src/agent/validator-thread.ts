import { workerEntry } from "../util/worker-entry.ts";
import type { AnswerError } from "./json-validator.ts";

/**
 * The main loop's side of the validator's thread (`validator-worker.ts`): one worker, started
 * on the first structured chat and kept; each ask has a time limit, and an ask past it ends
 * the worker (the next ask starts another; others in flight are asked again there). The core
 * never waits on Ajv itself (docs/agent.md, Thinking and structured output).
 */

/** What the main loop asks: compile `schema` (JSON text), and check `text` against it when given. */
export interface ValidatorAsk {
  id: number;
  schema: string;
  text?: string;
}

export type ValidatorAnswer =
  | { id: number; kind: "ready" }
  | { id: number; kind: "compiled" }
  /** The schema cannot be compiled, and why. */
  | { id: number; kind: "refused"; message: string }
  /** The answer checked: no errors and its value, or the first errors and (`total`) their count. */
  | { id: number; kind: "checked"; errors: AnswerError[]; total: number; value?: unknown }
  /** The thread could not do it (it stopped, or it could not hand the value over). */
  | { id: number; kind: "failed"; message: string }
  /** Past the time limit: the thread was ended. */
  | { id: number; kind: "timeout"; limitMs: number };

const workerFile = () =>
  workerEntry("./agent/validator-worker.ts", new URL("./validator-worker.ts", import.meta.url));

/** Longest a worker may take to start (load Ajv and the formats) before an ask fails. */
const START_LIMIT_MS = 15_000;

interface Pending {
  ask: ValidatorAsk;
  limitMs: number;
  resolve: (answer: ValidatorAnswer) => void;
  timer?: ReturnType<typeof setTimeout>;
}

class ValidatorThread {
  private worker: Worker | undefined;
  private ready: Promise<void> | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;

  ask(schema: string, text: string | undefined, limitMs: number): Promise<ValidatorAnswer> {
    const ask: ValidatorAsk = { id: this.nextId++, schema, ...(text === undefined ? {} : { text }) };
    return new Promise((resolve) => {
      const entry: Pending = { ask, limitMs, resolve };
      this.pending.set(ask.id, entry);
      this.send(entry);
    });
  }

  private send(entry: Pending): void {
    const started = this.start();
    started.ready.then(
      () => {
        if (this.worker !== started.worker || !this.pending.has(entry.ask.id)) return;
        entry.timer = setTimeout(() => this.expire(entry), entry.limitMs);
        started.worker.postMessage(entry.ask);
      },
      (err: Error) => this.settle(entry, { id: entry.ask.id, kind: "failed", message: err.message }),
    );
  }

  private start(): { worker: Worker; ready: Promise<void> } {
    if (this.worker && this.ready) return { worker: this.worker, ready: this.ready };
    const worker = new Worker(workerFile());
    // A worker left running never keeps the core alive.
    worker.unref();
    this.worker = worker;
    this.ready = new Promise<void>((resolve, reject) => {
      const limit = setTimeout(
        () => reject(new Error("the validator's thread did not start")),
        START_LIMIT_MS,
      );
      worker.onmessage = (event: MessageEvent<ValidatorAnswer>) => {
        if (event.data.kind === "ready") {
          clearTimeout(limit);
          resolve();
        } else this.answered(event.data);
      };
      worker.onerror = (event) => {
        clearTimeout(limit);
        reject(new Error(event.message));
        this.lost(worker, `the validator's thread stopped: ${event.message}`);
      };
    });
    this.ready.catch(() => this.lost(worker, "the validator's thread did not start"));
    return { worker, ready: this.ready };
  }

  private answered(answer: ValidatorAnswer): void {
    const entry = this.pending.get(answer.id);
    if (entry) this.settle(entry, answer);
  }

  private settle(entry: Pending, answer: ValidatorAnswer): void {
    clearTimeout(entry.timer);
    this.pending.delete(entry.ask.id);
    entry.resolve(answer);
  }

  /** An ask past its limit: the thread is ended, the others asked again on a fresh one. */
  private expire(entry: Pending): void {
    this.stop();
    this.settle(entry, { id: entry.ask.id, kind: "timeout", limitMs: entry.limitMs });
    for (const other of this.pending.values()) {
      clearTimeout(other.timer);
      this.send(other);
    }
  }

  private lost(worker: Worker, message: string): void {
    if (this.worker !== worker) return;
    this.stop();
    for (const entry of [...this.pending.values()])
      this.settle(entry, { id: entry.ask.id, kind: "failed", message });
  }

  private stop(): void {
    this.worker?.terminate();
    this.worker = undefined;
    this.ready = undefined;
  }
}

let thread: ValidatorThread | undefined;

/** Asks the validator's thread; never rejects: a limit passed or a lost thread is an answer too. */
export function askValidator(
  schema: string,
  text: string | undefined,
  limitMs: number,
): Promise<ValidatorAnswer> {
  thread ??= new ValidatorThread();
  return thread.ask(schema, text, limitMs);
}
