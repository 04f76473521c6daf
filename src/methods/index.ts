import type { EventName } from "../protocol/capabilities.ts";
import type { MethodEntry, MethodHandler, MethodTable } from "../protocol/method-table.ts";
import { abortable } from "../util/abortable.ts";
import type { AnyMethod } from "./definition.ts";
import type { Services } from "./services.ts";

/** A method's name and cancellability, and how to load its definition. */
export interface LazyMethod<D extends AnyMethod = AnyMethod> {
  readonly name: D["name"];
  readonly cancellable: D["cancellable"];
  load(): Promise<D>;
}

/**
 * Name and cancellability are repeated beside the loader because the dispatcher needs them
 * before the module loads (loading every definition at start-up would build every schema and
 * slow the cold start); the types make any mismatch with the definition a compile error.
 */
function lazy<
  const N extends string,
  const C extends boolean,
  D extends AnyMethod & { name: N; cancellable: C },
>(name: N, cancellable: C, load: () => Promise<D>): LazyMethod<D> {
  return { name, cancellable, load };
}

/**
 * Every method the core serves, in the order initialize lists them, each loaded on first use:
 * a ping never pays for the planner, the agent or the MCP SDK. The definitions (one per file)
 * are the only source of each method's params, result and events.
 */
export const METHODS = [
  lazy("initialize", false, () => import("./initialize.ts").then((m) => m.initialize)),
  lazy("ping", false, () => import("./ping.ts").then((m) => m.ping)),
  lazy("doctor", false, () => import("./doctor.ts").then((m) => m.doctor)),
  lazy("plan", false, () => import("./plan.ts").then((m) => m.plan)),
  lazy("chat", true, () => import("./chat.ts").then((m) => m.chat)),
  lazy("cancel", false, () => import("./cancel.ts").then((m) => m.cancel)),
  lazy("shutdown", false, () => import("./shutdown.ts").then((m) => m.shutdown)),
  lazy("warmup", true, () => import("./warmup.ts").then((m) => m.warmup)),
  lazy("models", false, () => import("./models.ts").then((m) => m.models)),
  lazy("models.load", true, () => import("./models-load.ts").then((m) => m.modelsLoad)),
  lazy("models.unload", true, () => import("./models-unload.ts").then((m) => m.modelsUnload)),
  lazy("embed", true, () => import("./embed.ts").then((m) => m.embed)),
  lazy("status", false, () => import("./status.ts").then((m) => m.status)),
  lazy("pull", true, () => import("./pull.ts").then((m) => m.pull)),
  lazy("sessions.list", false, () => import("./sessions.ts").then((m) => m.sessionsList)),
  lazy("sessions.get", false, () => import("./sessions.ts").then((m) => m.sessionsGet)),
  lazy("sessions.rename", false, () => import("./sessions.ts").then((m) => m.sessionsRename)),
  lazy("sessions.delete", false, () => import("./sessions.ts").then((m) => m.sessionsDelete)),
  lazy("sessions.search", true, () => import("./sessions.ts").then((m) => m.sessionsSearch)),
  lazy("sessions.export", false, () => import("./sessions.ts").then((m) => m.sessionsExport)),
  lazy("sessions.attachment", false, () => import("./sessions.ts").then((m) => m.sessionsAttachment)),
  lazy("users.delete", false, () => import("./sessions.ts").then((m) => m.usersDelete)),
  lazy("documents.add", true, () => import("./documents.ts").then((m) => m.documentsAdd)),
  lazy("documents.list", false, () => import("./documents.ts").then((m) => m.documentsList)),
  lazy("documents.delete", false, () => import("./documents.ts").then((m) => m.documentsDelete)),
] as const;

/** Served only with LOCAL_AI_TEST_METHODS=1; not part of the protocol's schema. */
export const TEST_METHODS = [
  lazy("test.sleep", true, () => import("./test-methods.ts").then((m) => m.sleep)),
  lazy("test.flood", false, () => import("./test-methods.ts").then((m) => m.flood)),
  lazy("test.fail", false, () => import("./test-methods.ts").then((m) => m.fail)),
] as const;

type Definition<M> = M extends LazyMethod<infer D> ? D : never;
/** Every protocol method's definition, by name. */
export type MethodDefinitions = { [M in (typeof METHODS)[number] as M["name"]]: Definition<M> };

/** Loads every protocol method's definition (all their modules): for the schema export and tests. */
export async function loadDefinitions(): Promise<AnyMethod[]> {
  return Promise.all(METHODS.map((m) => m.load()));
}

/** The dispatcher's table: each method bound to the core's services when it loads. */
export function methodTable(services: Services, options: { testMethods: boolean }): MethodTable {
  const list: readonly LazyMethod[] = options.testMethods ? [...METHODS, ...TEST_METHODS] : METHODS;
  return new Map(list.map((m) => [m.name, entry(m, services)]));
}

function entry(method: LazyMethod, services: Services): MethodEntry {
  return {
    name: method.name,
    cancellable: method.cancellable,
    load: () => method.load().then((def) => bind(def, services)),
  };
}

/**
 * The methods that open the store as they begin. A chat and a warm-up are not held here (the
 * model's start goes first): each waits for a migration once it needs the store (methods/chat.ts,
 * methods/warmup.ts).
 */
const usesStore = (name: string) =>
  name.startsWith("sessions.") || name.startsWith("documents.") || name === "users.delete";

/**
 * The one place every method passes: a method that uses the store waits, a cancel ending the
 * wait, while the store's migrations run on their thread (docs/agent.md, The store, "Migrations
 * off the loop"); ping, cancel and status never wait. With nothing to migrate it costs nothing.
 */
function bind(def: AnyMethod, services: Services): MethodHandler {
  const run: MethodHandler["run"] = (params, ctx) => def.run(params, ctx, services);
  if (!usesStore(def.name)) return { name: def.name, params: def.params, run };
  return {
    name: def.name,
    params: def.params,
    run: (params, ctx) => {
      const migrating = services.storeWait();
      if (!migrating) return run(params, ctx);
      // An erase waits even through the core's stop (the user asked for it); any other ends at
      // the stop's grace, or it held the stop for the whole migration.
      const ends = def.name.endsWith(".delete") ? ctx.signal : AbortSignal.any([ctx.signal, ctx.stopping]);
      return abortable(migrating, ends).then(() => run(params, ctx));
    },
  };
}

// The zod-free list initialize sends must name exactly the events the definitions declare.
type DeclaredEvent = {
  [N in keyof MethodDefinitions]: keyof ReturnType<MethodDefinitions[N]["events"]>;
}[keyof MethodDefinitions];
type Unlisted = Exclude<DeclaredEvent, EventName> | Exclude<EventName, DeclaredEvent>;
export const EVENT_NAMES_COMPLETE: [Unlisted] extends [never] ? true : Unlisted = true;
