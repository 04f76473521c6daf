import type { z } from "zod";
import type { MethodEntry } from "../methods/index.ts";
import type { MethodContext, MethodDef } from "../methods/types.ts";
import type { Core } from "../server/core.ts";
import { logger, logUnexpected } from "../util/logger.ts";
import { CoreError, type ErrorCode, isCoreError } from "./errors.ts";
import type { Frame } from "./framing.ts";
import { type RequestId, RequestIdSchema } from "./messages.ts";
import type { Writer } from "./writer.ts";

interface Active {
  id: RequestId;
  method: string;
  cancellable: boolean;
  controller: AbortController;
  done: Promise<void>;
  /** Its outcome is decided; a cancel arriving now finds it finished. */
  settled: boolean;
}

/** "1" and 1 are different ids: the key keeps the type. */
function keyOf(id: RequestId): string {
  return typeof id === "number" ? `n:${id}` : `s:${id}`;
}

/**
 * Owns in-flight work: parses each line into a request, runs its handler concurrently with
 * its own AbortController, and guarantees exactly one terminal message per usable id.
 */
export class Dispatcher {
  private readonly active = new Map<string, Active>();
  private shuttingDown = false;

  constructor(
    private readonly methods: ReadonlyMap<string, MethodEntry>,
    private readonly writer: Writer,
    private readonly core: Core,
    private readonly onShutdownRequest: (requestId: RequestId) => Promise<void>,
  ) {}

  get activeCount(): number {
    return this.active.size;
  }

  handleFrame(frame: Frame, maxLineBytes: number): void {
    if (frame.kind === "oversize") {
      this.fail(
        null,
        "invalid_request",
        `request line of ${frame.bytes} bytes exceeds the limit of ${maxLineBytes} bytes`,
      );
      return;
    }
    this.handleLine(frame.text);
  }

  handleLine(text: string): void {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (err) {
      this.fail(null, "invalid_json", `not valid JSON: ${(err as Error).message}`);
      return;
    }
    if (typeof value !== "object" || value === null || Array.isArray(value)) {
      this.fail(null, "invalid_request", "a request must be a JSON object with id and method");
      return;
    }
    const req = value as Record<string, unknown>;
    const idParse = RequestIdSchema.safeParse(req.id);
    if (!idParse.success) {
      const why =
        req.id === undefined ? "missing field 'id'" : "field 'id' must be a string or a finite number";
      this.fail(null, "invalid_request", why);
      return;
    }
    const id = idParse.data;
    if (typeof req.method !== "string" || req.method.length === 0) {
      this.fail(id, "invalid_request", "field 'method' must be a non-empty string");
      return;
    }
    const params = req.params ?? {};
    if (typeof params !== "object" || params === null || Array.isArray(params)) {
      this.fail(id, "invalid_request", "field 'params' must be an object");
      return;
    }
    const key = keyOf(id);
    if (this.active.has(key)) {
      this.fail(id, "invalid_request", `id ${JSON.stringify(id)} is already in use by an active request`);
      return;
    }
    const method = this.methods.get(req.method);
    if (!method) {
      this.fail(id, "unknown_method", `unknown method '${req.method}'`);
      return;
    }
    if (this.shuttingDown && method.name !== "shutdown") {
      this.fail(id, "cancelled", "the core is shutting down");
      return;
    }
    this.start(id, key, method, params);
  }

  /**
   * Cancels a cancellable request. Without an id, only when exactly one is active.
   * Throws invalid_request when the target is ambiguous.
   */
  cancel(requestId: RequestId | undefined): boolean {
    if (requestId === undefined) {
      const candidates = [...this.active.values()].filter((a) => a.cancellable && !a.settled);
      if (candidates.length > 1) {
        throw new CoreError(
          "invalid_request",
          `request_id is required while ${candidates.length} chats are active`,
          { field: "request_id" },
        );
      }
      const only = candidates[0];
      if (!only || only.controller.signal.aborted) return false;
      only.controller.abort(new CoreError("cancelled", "cancelled by the host"));
      return true;
    }
    const target = this.active.get(keyOf(requestId));
    if (!target?.cancellable || target.settled || target.controller.signal.aborted) return false;
    target.controller.abort(new CoreError("cancelled", "cancelled by the host"));
    return true;
  }

  /**
   * Cancels every active chat-like request, lets short ones (ping, doctor…) finish, and waits
   * until each active request except `except` has answered.
   */
  async stopAll(except?: RequestId): Promise<void> {
    this.shuttingDown = true;
    const exceptKey = except === undefined ? undefined : keyOf(except);
    const waiting: Promise<void>[] = [];
    for (const [key, a] of this.active) {
      if (key === exceptKey) continue;
      if (a.cancellable && !a.controller.signal.aborted) {
        a.controller.abort(new CoreError("cancelled", "the core is shutting down"));
      }
      waiting.push(a.done);
    }
    await Promise.all(waiting);
  }

  private start(id: RequestId, key: string, method: MethodEntry, params: unknown): void {
    const controller = new AbortController();
    let dropped = 0;
    const ctx: MethodContext = {
      id,
      signal: controller.signal,
      core: this.core,
      emit: (event, fields) => {
        const ok = this.writer.event({ ...fields, id, type: "event", event });
        if (!ok) dropped++;
        return ok;
      },
      get droppedEvents() {
        return dropped;
      },
      cancel: (requestId) => this.cancel(requestId),
      methodNames: () => [...this.methods.keys()],
      shutdown: () => this.onShutdownRequest(id),
    };
    // Registered before the method's module loads, so duplicates and cancels see it at once.
    const entry: Active = {
      id,
      method: method.name,
      cancellable: method.cancellable,
      controller,
      done: Promise.resolve(),
      settled: false,
    };
    this.active.set(key, entry);
    entry.done = this.run(method, params, ctx, entry).finally(() => {
      this.active.delete(key);
    });
  }

  private async run(method: MethodEntry, params: unknown, ctx: MethodContext, entry: Active): Promise<void> {
    const signal = entry.controller.signal;
    let message: Parameters<Writer["terminal"]>[0];
    try {
      const def = await this.definition(method);
      const parsed = def.params.safeParse(params);
      if (!parsed.success) {
        throw new CoreError("invalid_request", describeParamsError(parsed.error), {
          field: parsed.error.issues[0]?.path.join(".") || null,
        });
      }
      const result = await def.run(parsed.data as z.infer<typeof def.params>, ctx);
      // A cancel that was acknowledged must end the request as cancelled, even if it raced the finish.
      if (signal.aborted && method.cancellable) throw signal.reason;
      message = { id: ctx.id, type: "result", result: result ?? {} };
    } catch (err) {
      message = toErrorMessage(ctx.id, err, signal, method.name);
    }
    entry.settled = true;
    try {
      await this.writer.terminal(message);
    } catch (err) {
      // The result could not be serialized (e.g. a BigInt); the id still gets its one answer.
      logUnexpected(`method ${method.name} produced an unserializable result`, err);
      await this.writer.terminal(toErrorMessage(ctx.id, new Error("unserializable"), signal, method.name));
    }
  }

  private readonly loaded = new Map<string, MethodDef>();

  private async definition(method: MethodEntry): Promise<MethodDef> {
    const cached = this.loaded.get(method.name);
    if (cached) return cached;
    const def = await method.load();
    this.loaded.set(method.name, def);
    return def;
  }

  private fail(id: RequestId | null, code: ErrorCode, message: string, data?: Record<string, unknown>): void {
    void this.writer.terminal({ id, type: "error", code, message, ...(data ? { data } : {}) });
  }
}

function toErrorMessage(id: RequestId, err: unknown, signal: AbortSignal, method: string) {
  if (isCoreError(err)) {
    return {
      id,
      type: "error" as const,
      code: err.code,
      message: err.message,
      ...(err.data ? { data: err.data } : {}),
    };
  }
  if (signal.aborted) {
    const reason = signal.reason;
    const message = isCoreError(reason) ? reason.message : "the request was cancelled";
    return { id, type: "error" as const, code: "cancelled" as const, message };
  }
  logUnexpected(`method ${method} failed`, err);
  logger.debug("the stack trace above stays on stderr; the host gets internal_error");
  return {
    id,
    type: "error" as const,
    code: "internal_error" as const,
    message: `internal error in ${method}; see the core's log for details`,
  };
}

function describeParamsError(error: z.ZodError): string {
  const issue = error.issues[0];
  if (!issue) return "invalid params";
  const field = issue.path.length ? `params.${issue.path.join(".")}` : "params";
  return `${field}: ${issue.message}`;
}
