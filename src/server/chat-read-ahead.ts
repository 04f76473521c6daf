import type { Config } from "../config/schema.ts";
import { METHODS } from "../methods/index.ts";

/**
 * When the turn's modules and the database are read ahead after `initialize`: after a chat sent
 * at once has spawned llama-server (~20 ms after it on the project's VM), well before a person
 * types one.
 */
const TURN_READ_AHEAD_MS = 100;

export interface ReadAheadDeps {
  /** A test's stand-in provider: it plans nothing, so nothing is probed for it. */
  standIn: boolean;
  config(): Config;
  store(): unknown;
  /** The core's shutdown has begun: the database is not opened for a chat that will not come. */
  stopping(): boolean;
}

/**
 * What a first chat needs, read ahead after `initialize` on idle turns of the event loop: first
 * what its start needs before the spawn (the machine's probe, the model's header, the
 * supervisor's modules), then, a moment later, the turn's modules and the database, which a chat
 * sent at once loads itself after its spawn, while the model loads (docs/performance.md, "A cold
 * chat's way to the spawn").
 */
export function readAheadForChat(deps: ReadAheadDeps): void {
  // After the answer that asked for it, most often before a chat sent at once is read (its plan
  // takes this probe; a chat read first has this start join its probe: ProbeAhead).
  setImmediate(() => {
    probeAhead(deps);
    void METHODS.find((m) => m.name === "chat")
      ?.load()
      .catch(() => {});
    if (!deps.standIn) require("../runtime/provider.ts");
  }).unref?.();
  setTimeout(() => {
    if (deps.stopping()) return;
    void import("../agent/turn/run-turn.ts").catch(() => {});
    // The database (its first open creates the schema, or imports a 0.1 folder once): a
    // failure here is the chat's to report.
    try {
      deps.store();
    } catch {}
  }, TURN_READ_AHEAD_MS).unref?.();
}

/**
 * The machine's probe and the model's header, begun before the chat's and the supervisor's
 * modules are loaded: each of the probe's steps (the binary's stats, the vendor tools, the
 * `--list-devices` spawn) is an await that waits behind whatever the loop runs, and a cold chat's
 * plan waits for its end (docs/performance.md, "A cold chat's way to the spawn").
 */
function probeAhead(deps: ReadAheadDeps): void {
  if (deps.standIn) return;
  let config: Config;
  try {
    config = deps.config();
  } catch {
    return; // the chat reports it
  }
  const { llamaServerAsked } =
    require("../config/find-binary-asked.ts") as typeof import("../config/find-binary-asked.ts");
  const { modelMemo, probeAhead } =
    require("../models/local-plan-deps.ts") as typeof import("../models/local-plan-deps.ts");
  void llamaServerAsked(config).then((server) => probeAhead.start(server));
  modelMemo.read(config.model.path).catch(() => {});
}
