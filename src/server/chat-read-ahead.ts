import type { Config } from "../config/schema.ts";
import { METHODS } from "../methods/index.ts";

/**
 * When the database is opened ahead after `initialize` (its first open: ~15 ms on the one
 * thread): after a chat sent at once has spawned llama-server, well before a person types one.
 */
const STORE_READ_AHEAD_MS = 100;

export interface ReadAheadDeps {
  /** A test's stand-in provider: it plans nothing, so nothing is probed for it. */
  standIn: boolean;
  config(): Config;
  store(): unknown;
  /** The core's shutdown has begun: the database is not opened for a chat that will not come. */
  stopping(): boolean;
  /** A chat has begun: it loads what it needs itself, its turn's modules once it has spawned. */
  chatBegun?(): boolean;
  /** A test's stand-in for the modules' evaluation (loadChatModules). */
  loadModules?(): void;
}

/**
 * What a first chat needs, read ahead after `initialize` on idle turns of the event loop: first
 * the machine's probe and the model's header, then the chat's, the supervisor's and the turn's
 * modules, and a moment later the database, which a chat sent at once opens itself after its
 * spawn (docs/performance.md, "A cold chat's way to the spawn").
 */
export function readAheadForChat(deps: ReadAheadDeps): void {
  // After the answer that asked for it, most often before a chat sent at once is read (its plan
  // takes this probe; a chat read first has this start join its probe: ProbeAhead).
  //
  // The modules a chat evaluates (~25 ms on the one thread) once the probe has begun: evaluated
  // while `--list-devices` runs in its own process, which a cold chat's plan waits for anyway,
  // not before it (the probe's steps would wait behind them) nor while llama-server loads (on
  // two cores, its load and this evaluation share them): docs/performance.md.
  setImmediate(() => {
    void probeMachine(deps).then(() => setImmediate(() => loadChatModules(deps)));
  }).unref?.();
  setTimeout(() => {
    if (deps.stopping()) return;
    // The database (its first open creates the schema, or imports a 0.1 folder once): a
    // failure here is the chat's to report.
    try {
      deps.store();
    } catch {}
  }, STORE_READ_AHEAD_MS).unref?.();
}

/**
 * The machine's probe and the model's header, begun before the chat's and the supervisor's
 * modules are loaded: each of the probe's steps (the binary's stats, the vendor tools, the
 * `--list-devices` spawn) is an await that waits behind whatever the loop runs, and a cold chat's
 * plan waits for its end (docs/performance.md, "A cold chat's way to the spawn").
 */
async function probeMachine(deps: ReadAheadDeps): Promise<void> {
  if (deps.standIn || deps.stopping()) return;
  let config: Config;
  try {
    config = deps.config();
  } catch {
    return; // the chat reports it
  }
  const { llamaServerAsked } =
    require("../config/find-binary-asked.ts") as typeof import("../config/find-binary-asked.ts");
  const { listingMemo, modelMemo, probeAhead } =
    require("../models/local-plan-deps.ts") as typeof import("../models/local-plan-deps.ts");
  // The listing memo lives in data_dir, read async with a bounded wait (listing-memo.ts).
  listingMemo.serve(config.app.data_dir, deps.stopping);
  // Not once the core began stopping (a shutdown right after initialize, a lookup slow on its
  // drive): the probe runs nvidia-smi, rocm-smi and `--list-devices` for a core on its way out.
  const asked = llamaServerAsked(config).then((server) => {
    if (!deps.stopping()) probeAhead.start(server);
  });
  modelMemo.read(config.model.path).catch(() => {});
  await asked.catch(() => {});
}

/** The chat method's, the supervisor's and the turn's modules (their first evaluation). */
function loadChatModules(deps: ReadAheadDeps): void {
  // A chat sent at once has begun meanwhile: it has its method's and the supervisor's modules,
  // and loads the turn's once llama-server is spawned. Evaluated here (~25 ms on the one thread)
  // they held its plan's awaits and so its spawn, most of all when the listing memo answered the
  // probe and no `--list-devices` ran for them to overlap (docs/performance.md).
  if (deps.stopping() || deps.chatBegun?.()) return;
  if (deps.loadModules) {
    deps.loadModules();
    return;
  }
  void METHODS.find((m) => m.name === "chat")
    ?.load()
    .catch(() => {});
  if (!deps.standIn) require("../runtime/provider.ts");
  void import("../agent/turn/run-turn.ts").catch(() => {});
}
