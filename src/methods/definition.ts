import type { z } from "zod";
import type { RequestContext } from "../protocol/method-table.ts";
import type { Services } from "./services.ts";

/** Event name → the zod schema of that event's fields. */
export type EventSchemas = Record<string, z.ZodType<object, object>>;

/** The fields each declared event carries, for a typed `emit`. */
export type EventsOf<E extends EventSchemas> = { [K in keyof E]: z.input<E[K]> };

/**
 * One protocol method, defined once: everything the registry, the JSON Schema and the client
 * types derive from, and the handler. `run` gets the validated params, a context whose `emit`
 * knows only the declared events, and the core's services; it returns the declared result (a
 * plain value is answered before the next line is read) or throws a CoreError.
 */
export interface MethodDefinition<
  N extends string = string,
  C extends boolean = boolean,
  P extends z.ZodType = z.ZodType,
  R extends z.ZodType = z.ZodType,
  E extends EventSchemas = EventSchemas,
> {
  readonly name: N;
  /** Long-running work that `cancel` may target (chat, warm-up). */
  readonly cancellable: C;
  /** Checked on every request: a failed parse is `invalid_request` naming the field. */
  readonly params: P;
  /**
   * The result's schema, and (below) the events' schemas, as thunks: the core never checks its
   * own output, so they are built only when asked for (the schema export), not when the method
   * loads; their types still check what `run` returns and emits.
   */
  readonly result: () => R;
  /** The events it may send before its result (none for most methods). */
  readonly events: () => E;
  run(
    params: z.output<P>,
    ctx: RequestContext<EventsOf<E>>,
    services: Services,
  ): z.input<R> | Promise<z.input<R>>;
}

/** Any definition, for the registry and the schema export. */
export type AnyMethod = MethodDefinition<string, boolean, z.ZodType, z.ZodType, any>;

/** Defines a method; `cancellable` defaults to false and `events` to none. */
export function defineMethod<
  const N extends string,
  P extends z.ZodType,
  R extends z.ZodType,
  // biome-ignore lint/complexity/noBannedTypes: no events is the empty map
  E extends EventSchemas = {},
  const C extends boolean = false,
>(def: {
  name: N;
  cancellable?: C;
  params: P;
  result: () => R;
  events?: () => E;
  run: MethodDefinition<N, C, P, R, E>["run"];
}): MethodDefinition<N, C, P, R, E> {
  return { ...def, cancellable: (def.cancellable ?? false) as C, events: def.events ?? (() => ({}) as E) };
}
