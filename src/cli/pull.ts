import { readdirSync } from "node:fs";
import { defineCommand } from "citty";
import { fitVerdictWith } from "../models/fit-verdict.ts";
import { hubCacheDir, repoPaths } from "../models/hf-cache.ts";
import type { ProgressPhase } from "../models/progress.ts";
import { type PullDeps, pullModel } from "../models/pull.ts";
import { ProgressPrinter, renderPulled } from "../models/pull-render.ts";
import { killRunningProbes } from "../plan/run-probe.ts";
import { CoreError, cancelledError, isCoreError } from "../protocol/errors.ts";
import type { FitVerdict } from "../protocol/fit-verdict.ts";
import { HF_PREFIX, parseModelRef, RevisionSchema } from "../protocol/model-ref.ts";
import { machinePullDeps } from "../server/pull-deps.ts";
import { CoreServices } from "../server/services.ts";
import { logger } from "../util/logger.ts";
import { terminalJson } from "../util/terminal-text.ts";
import { configArg, jsonArg, requireNamedConfig } from "./args.ts";
import { reportFailure } from "./failure.ts";
import { closableOutput, SIGNAL_EXIT } from "./output.ts";

export default defineCommand({
  meta: { name: "pull", description: "Download a GGUF from the Hugging Face hub into the shared cache" },
  args: {
    model: {
      type: "positional",
      description: "org/name, org/name:QUANT (such as Q4_K_M) or org/name:path/in/repo.gguf",
      required: true,
      valueHint: "REPO[:QUANT|:FILE]",
    },
    revision: { type: "string", description: "branch, tag or commit", default: "main", valueHint: "R" },
    ...configArg,
    ...jsonArg,
  },
  run: async ({ args }) => {
    const ac = new AbortController();
    const stop = () => ac.abort();
    // 130 for Ctrl-C, 143 for SIGTERM, as every other command exits.
    let interrupted: number = SIGNAL_EXIT.SIGINT;
    const onTerm = () => {
      interrupted = SIGNAL_EXIT.SIGTERM;
      stop();
    };
    // A reader that left (`| head -1`) stops the pull as Ctrl-C does: the partial is kept.
    const stdout = closableOutput(stop);
    const out = (text: string) => stdout.write(text);
    const printer = new ProgressPrinter(
      out,
      process.stdout.isTTY ? { columns: process.stdout.columns || 80 } : null,
    );
    process.once("SIGINT", stop);
    process.once("SIGTERM", onTerm);
    let downloaded = false;
    // The part and phase of the last progress event; part 0 while the hub is still asked.
    let at: { part: number; phase?: ProgressPhase; whole?: boolean } = { part: 0 };
    const deps = machinePullDeps();
    try {
      const ref = parseRef(args.model, args.revision);
      // The verdict's settings: a typo in --config is said before the download, not judged with the defaults.
      requireNamedConfig(args.config);
      const outcome = await pullModel(ref, deps, {
        signal: ac.signal,
        progress: (p) => {
          at = { part: p.part, phase: p.phase, whole: p.bytes_done >= p.total };
          if (args.json) out(`${terminalJson({ type: "event", event: "download_progress", ...p })}\n`);
          else printer.show(p);
        },
        note: (message) => {
          printer.end();
          logger.warn(message);
        },
      });
      printer.end();
      downloaded = true;
      const services = new CoreServices({ configPath: args.config, cwd: process.cwd() });
      const fit = await unlessStopped(fitVerdictWith(services, outcome.path, ac.signal), ac.signal);
      const result = { ...outcome, fit };
      const what = ref.file ?? ref.quant;
      // hf: references name main's snapshot, so only a pull of main prints one.
      const hfRef = what && ref.revision === "main" ? `${HF_PREFIX}${ref.repo}:${what}` : undefined;
      out(args.json ? `${terminalJson({ type: "result", result })}\n` : renderPulled(result, hfRef));
      // A file that took the progress but not the result (its disk filled): the script read no result.
      if (!stdout.closed) return 0;
      logger.warn(`${outputLost(stdout.failure)}, so the result was not printed; the model is in the cache`);
      return 1;
    } catch (err) {
      printer.end();
      if (isCoreError(err) && err.code === "cancelled") {
        const stopped = { ...at, earlierPartial: at.part === 0 && partialOnDisk(deps, args.model) };
        const unfinished = (again: string) => stopLeft(stopped, err, again);
        if (stdout.closed) {
          // A cached model's first line, and the fit check, come after the download: the file is complete.
          const kept = downloaded ? "; the model is in the cache" : unfinished("run it again");
          logger.warn(`${outputLost(stdout.failure)}, so the pull stopped${kept}`);
          return 1;
        }
        if (args.json) out(`${terminalJson({ type: "error", ...reportFailure(err, "pull") })}\n`);
        logger.warn(
          downloaded
            ? "pull cancelled before its fit check was done; the downloaded file is in the cache"
            : `pull cancelled${unfinished("run the same command")}`,
        );
        return interrupted;
      }
      if (!args.json) throw err;
      // NDJSON to the end: the error is one more line, printed here once (not run.ts's document).
      out(`${terminalJson({ type: "error", ...reportFailure(err, "pull") })}\n`);
      return 1;
    } finally {
      process.off("SIGINT", stop);
      process.off("SIGTERM", onTerm);
    }
  },
});

/**
 * The fit check (given the signal) as a signal leaves it: its probes (llama-server --list-devices
 * may wait 5 s) killed, the pull ended as cancelled; a Ctrl-C there was waited out, then exit 0.
 */
async function unlessStopped(check: Promise<FitVerdict>, signal: AbortSignal): Promise<FitVerdict> {
  try {
    return await check;
  } catch (err) {
    if (!signal.aborted) throw err;
    killRunningProbes();
    throw cancelledError("the pull was cancelled while checking whether the model fits");
  }
}

/** Where a pull stopped: its last progress event's part (0 before any) and phase. */
export interface PullStop {
  part: number;
  phase?: ProgressPhase;
  /** Whether that event's file was whole: the next file's storage may still be asked, no event of its own yet. */
  whole?: boolean;
  /** Before any event: whether the repo's cache folder holds a partial an earlier pull left. */
  earlierPartial: boolean;
}

/**
 * What a pull stopped before its file was whole left, as its message's tail: a partial to
 * resume, or nothing yet. Before any event the hub was still asked: nothing written by this run,
 * but a resumed pull's earlier bytes are still there (the core's error gives their size once the
 * storage was asked for the rest). A first part stopped before its body's first byte
 * (`bytes_done` 0) left an empty partial, dropped; one waiting on another pull's lock has none of
 * its own (the partial on disk is that pull's). A later part's stop leaves the earlier parts
 * whole, which the next run does not fetch again.
 */
export function stopLeft(at: PullStop, err: CoreError, again: string): string {
  const kept = `; the partial download is kept, ${again} to resume`;
  // Stopped once verified (its flush, download.ts): the file is whole and in place, no partial.
  const { bytes_done: done, total } = err.data ?? {};
  if (typeof total === "number" && total > 0 && done === total)
    return `; the downloaded file is kept, ${again} to finish`;
  if (at.part > 1) return kept;
  if (at.part === 1) {
    if (at.phase === "wait")
      return " while another pull of the same file was downloading it (the partial on disk is that pull's)";
    // A whole first file is kept whatever the next one's bytes (its error's `bytes_done`, 0).
    return at.whole || err.data?.bytes_done !== 0 ? kept : " before its download began";
  }
  const earlier = err.data?.bytes_done;
  if (typeof earlier === "number" && earlier > 0)
    return `; the partial download an earlier run left is kept, ${again} to resume`;
  return at.earlierPartial
    ? " before its download began; a partial download an earlier pull of this repo left is kept"
    : " before its download began";
}

/** Whether the blobs folder of `model`'s repo holds a partial (`.incomplete`); false when it cannot be read. */
function partialOnDisk(deps: PullDeps, model: string): boolean {
  try {
    const blobs = repoPaths(hubCacheDir(deps.env, deps.home), parseModelRef(model).repo).blobs;
    return readdirSync(blobs).some((name) => name.endsWith(".incomplete"));
  } catch {
    return false;
  }
}

/** Why pull's stdout took no more: its reader left (EPIPE), or a write failed otherwise (a full disk). */
function outputLost(failure: Error | undefined): string {
  const code = (failure as NodeJS.ErrnoException | undefined)?.code;
  return !failure || code === "EPIPE" || code === "EBADF"
    ? "stdout was closed"
    : `stdout could not be written (${failure.message})`;
}

function parseRef(model: string, revision: string) {
  const rev = RevisionSchema.safeParse(revision);
  if (!rev.success)
    // Quoted, as the CLI names what it was given: an empty one read "--revision : …".
    throw new CoreError("invalid_request", `--revision '${revision}': ${rev.error.issues[0]?.message}`);
  try {
    return parseModelRef(model, revision);
  } catch (err) {
    throw new CoreError("invalid_request", (err as Error).message);
  }
}
