import type { Config } from "../../config/schema.ts";
import { flags } from "../argv.ts";
import { padCells } from "../estimate.ts";
import type { Decided } from "./decided.ts";
import { type Fitter, noFit, type Trial } from "./fit.ts";

/**
 * Context per slot (`-c` is it times the slots), chosen together with the GPU layers since the
 * two compete for the same memory. Auto climbs a ladder and takes the largest step that fits
 * with room to spare; an explicit context must fit as asked.
 */

/** Auto context steps; auto never goes past the last one (bigger contexts must be asked for). */
export const CONTEXT_LADDER = [2048, 4096, 8192, 16384, 32768];
/** With only part of the model on the GPU, context competes with layers: stay modest. */
const PARTIAL_OFFLOAD_MAX_CTX = 8192;
/** The whole model on the GPU is preferred only at a context at least this useful. */
const WHOLE_ON_GPU_MIN_CTX = 4096;

/** `model.context` capped at the trained context (with a warning), or null for auto. */
export function capContext(
  requested: Config["model"]["context"],
  train: number,
): { ctx: number | null; warnings: string[] } {
  if (typeof requested !== "number") return { ctx: null, warnings: [] };
  if (requested <= train) return { ctx: requested, warnings: [] };
  return {
    ctx: train,
    warnings: [
      `model.context ${requested} is above the model's trained context ${train}: capped to ${train}`,
    ],
  };
}

/** The ladder's steps the model was trained for, largest first (just `train` if below them all). */
export function ladderSteps(train: number): number[] {
  const steps = CONTEXT_LADDER.filter((c) => c <= train);
  return steps.length > 0 ? steps.reverse() : [train];
}

/** Everything the context search needs; `layersFor` is the explicit count or the most that fit. */
export interface ContextSearch {
  fit: Fitter;
  layersFor: (ctx: number) => number;
  slots: number;
  train: number;
  /** n_layer + 1: every layer and the output head. */
  maxNgl: number;
  /** Whether any GPU has memory to spend. */
  gpus: boolean;
  explicitNgl: number | null;
  /** For error messages. */
  architecture: string;
}

export interface ChosenContext {
  ctx: number;
  ngl: number;
  trial: Trial;
  why: string;
  warnings: string[];
}

/** The context (and the layers that go with it); model_plan_error when nothing fits. */
export function chooseContext(s: ContextSearch, explicitCtx: number | null): ChosenContext {
  if (explicitCtx !== null) {
    const ngl = s.layersFor(explicitCtx);
    const trial = s.fit(explicitCtx, ngl, s.slots);
    if (!trial.fits) throw noFit(s.architecture, trial, explicitCtx, s.slots, "model.context");
    return { ctx: explicitCtx, ngl, trial, why: "model.context", warnings: [] };
  }
  return wholeOnGpu(s) ?? largestRoomy(s) ?? smallestUseful(s);
}

/** 1. The whole model on the GPU with a useful context beats a bigger context half on the CPU. */
function wholeOnGpu(s: ContextSearch): ChosenContext | null {
  if (!s.gpus || (s.explicitNgl !== null && s.explicitNgl !== s.maxNgl)) return null;
  for (const ctx of ladderSteps(s.train)) {
    if (ctx < Math.min(WHOLE_ON_GPU_MIN_CTX, s.train)) break;
    const trial = s.fit(ctx, s.maxNgl, s.slots);
    if (trial.fits && trial.roomy) {
      const why = "the largest step that fits on the GPU with room to spare";
      return { ctx, ngl: s.maxNgl, trial, why, warnings: [] };
    }
  }
  return null;
}

/** 2. Otherwise the largest step that fits with room, a partial offload kept modest. */
function largestRoomy(s: ContextSearch): ChosenContext | null {
  for (const ctx of ladderSteps(s.train)) {
    const ngl = s.layersFor(ctx);
    if (ngl > 0 && ngl < s.maxNgl && ctx > PARTIAL_OFFLOAD_MAX_CTX) continue;
    const trial = s.fit(ctx, ngl, s.slots);
    if (trial.fits && trial.roomy) {
      const why = "the largest step that fits while leaving room for the rest of the machine";
      return { ctx, ngl, trial, why, warnings: [] };
    }
  }
  return null;
}

/** 3. Tight: the smallest useful context, if it fits at all. */
function smallestUseful(s: ContextSearch): ChosenContext {
  const ctx = Math.min(CONTEXT_LADDER[0]!, s.train);
  const ngl = s.layersFor(ctx);
  const trial = s.fit(ctx, ngl, s.slots);
  if (!trial.fits) throw noFit(s.architecture, trial, ctx, s.slots, null);
  return {
    ctx,
    ngl,
    trial,
    why: "the smallest useful context: memory is tight",
    warnings: ["memory is tight: the plan uses the smallest useful context and leaves little room"],
  };
}

/** The context line: per slot, rounded up to whole KV cells as llama-server does. */
export function decideContext(
  chosen: Pick<ChosenContext, "ctx" | "why">,
  train: number,
  slots: number,
  explicit: boolean,
): Decided<number> {
  const ctx = padCells(chosen.ctx);
  return {
    value: ctx,
    decision: {
      name: "context",
      value: ctx,
      source: explicit ? "config" : "auto",
      flags: flags.context(ctx, slots),
      reason:
        `${ctx} tokens per slot (trained: ${train}); ${chosen.why}` +
        (slots > 1 ? `; -c is the total, ${ctx} × ${slots} slots` : ""),
    },
  };
}
