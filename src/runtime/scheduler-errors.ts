import { CoreError, type CoreErrorData, cancelledError } from "../protocol/errors.ts";
import { seconds } from "../util/seconds.ts";
import type { DeviceShortfall } from "./memory-fit.ts";

/**
 * The scheduler's refusals (docs/models.md "Several models"), one place for their codes and words.
 * `model_busy` is a `data.reason` the protocol lists with the models methods; until then the
 * data is built loosely here.
 */

const gib = (b: number) => `${(b / 1024 ** 3).toFixed(1)} GiB`;

export function modelBusy(model: string, chats: number): CoreError {
  const data: Record<string, unknown> = { reason: "model_busy", model, chats };
  return new CoreError(
    "invalid_request",
    `model "${model}" is in use by ${chats} chat(s); unload it with force to end them`,
    data as CoreErrorData,
  );
}

export function notLoaded(model: string, known: boolean): CoreError {
  return new CoreError(
    "invalid_request",
    known ? `model "${model}" is not loaded` : `no model "${model}" is configured or loaded`,
    { model },
  );
}

/** The refusals of a load that gave up waiting (`load_wait_s`): it started nothing (model-load.ts). */
const gaveUp = new WeakSet<object>();

export const gaveUpWaiting = (err: unknown): boolean => err instanceof CoreError && gaveUp.has(err);

function waitedTooLong(err: CoreError): CoreError {
  gaveUp.add(err);
  return err;
}

const quoted = (names: readonly string[]) => names.map((n) => `"${n}"`).join(", ");

/**
 * A load that waited `load_wait_s` for room: the models that held it, and which of them are
 * pinned. Waiting never frees a pinned one (it is never unloaded to make room, busy or idle), so
 * the message says how to free it rather than to wait for its chats: an unload, or models.load's
 * `pin: false`, which takes back a pin of the config's or of an earlier models.load alike (the
 * config is read once, at start, and a pin models.load gave is in no config).
 */
export function noRoom(
  model: string,
  holders: readonly string[],
  pinned: readonly string[],
  waitedMs: number,
): CoreError {
  const pins = holders.filter((h) => pinned.includes(h));
  const inUse = holders.filter((h) => !pinned.includes(h));
  const one = (names: readonly string[], it: string, they: string) => (names.length > 1 ? they : it);
  const why: string[] = [];
  if (inUse.length > 0)
    why.push(
      `${quoted(inUse)} stayed in use: wait for ${one(inUse, "its", "their")} chats to end, ` +
        `or unload ${one(inUse, "it", "one of them")}`,
    );
  if (pins.length > 0)
    why.push(
      `${quoted(pins)} ${one(pins, "is", "are")} pinned, never unloaded to make room: unload ` +
        `${one(pins, "it", "them")} with models.unload, or unpin ${one(pins, "it", "them")} (models.load with pin: false)`,
    );
  return waitedTooLong(
    new CoreError(
      "model_plan_error",
      `model "${model}" does not fit beside ${quoted(holders)}; waited ${seconds(waitedMs)} ` +
        `(llama.load_wait_s): ${why.join("; ")}`,
      { model, holders: [...holders], pinned: pins },
    ),
  );
}

/** A spare load's refusals (`noSpareRoom`): its caller goes on without the model. */
const spareRefused = new WeakSet<object>();

export const refusedSpare = (err: unknown): boolean => err instanceof CoreError && spareRefused.has(err);

/**
 * A spare load (recall's query vector, model-state.ts) that does not fit now: it unloads no model
 * and waits for none, so a turn's recall goes on by words at once rather than after its 1.5 s.
 */
export function noSpareRoom(model: string, holders: readonly string[]): CoreError {
  const err = new CoreError(
    "model_plan_error",
    `model "${model}" was not loaded for a spare ask: ${quoted(holders)} hold the room it needs`,
    { model, holders: [...holders] },
  );
  spareRefused.add(err);
  return waitedTooLong(err);
}

/**
 * A load that waited `load_wait_s` for other models' admitted loads to end (its plan is made once
 * they have taken their memory, model-load.ts): the models still loading.
 */
export function stillLoading(model: string, holders: readonly string[], waitedMs: number): CoreError {
  return waitedTooLong(
    new CoreError(
      "model_plan_error",
      `model "${model}" waited ${seconds(waitedMs)} (llama.load_wait_s) for ` +
        `${quoted(holders)} to finish loading; try again once it has loaded`,
      { model, holders: [...holders] },
    ),
  );
}

/** A model whose plan takes more than a device's whole budget, with nothing else loaded. */
export function neverFits(model: string, devices: readonly DeviceShortfall[]): CoreError {
  const each = devices.map((d) => `${d.device} needs ${gib(d.needed_bytes)} of ${gib(d.budget_bytes)}`);
  return new CoreError("model_plan_error", `model "${model}" does not fit even alone: ${each.join("; ")}`, {
    model,
    devices: devices.map((d) => ({ ...d })),
  });
}

export const schedulerClosed = () => cancelledError("the model cannot load: the core is shutting down");

export const unloadedWhileWaiting = (model: string) =>
  cancelledError(`model "${model}" was unloaded while the request waited for it`);
