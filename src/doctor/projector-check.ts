import { basename } from "node:path";
import type { ProjectorChoice } from "../plan/projector.ts";
import { isCoreError } from "../protocol/errors.ts";
import type { Check } from "./checks.ts";

/**
 * A chat model's vision projector as doctor reports it (docs/doctor.md): the one its `mmproj`
 * setting finds, with both widths; none (`mmproj: none`, or `auto` found none: a warning when it
 * passed one over); or a failure naming the projector and both widths when a configured one
 * cannot serve its model (recordings 105b–105d: llama-server would exit at start).
 */

/** What doctor read of a model's projector: the choice, or the plan's error. */
export type ProjectorRead = { choice: ProjectorChoice } | { error: unknown };

/**
 * `mmprojKey`: the config key a fix names (`model.mmproj`, `models.<i>.mmproj`). Null when there
 * is nothing to say: `none`, or `auto` with no projector to pass over (a text model's doctor
 * stays as it was).
 */
export function projectorCheck(read: ProjectorRead, mmprojKey: string): Check | null {
  if ("error" in read) {
    const err = read.error;
    if (!isCoreError(err)) throw err;
    return {
      id: "projector",
      status: "fail",
      message: err.message,
      fix:
        err.data?.problem === "width_mismatch"
          ? `set ${mmprojKey} to this model's own projector (its projection width must be the model's embedding width), or to none`
          : `set ${mmprojKey} to a vision projector GGUF that exists, auto, or none`,
      data: { code: err.code, ...err.data },
    };
  }
  const { choice } = read;
  if (choice.kind === "none") {
    if (!choice.warning) return null;
    return {
      id: "projector",
      status: "warn",
      message: `no vision projector: ${choice.warning}`,
      fix: `set ${mmprojKey} to the projector made for this model, or to none`,
      data: { path: null },
    };
  }
  const p = choice.info;
  return {
    id: "projector",
    status: "ok",
    message: `${basename(p.path)}: projector ${p.projector_type}, ${p.file_type}, projection width ${p.width} = the model's embedding width (${choice.source === "auto" ? "found by mmproj: auto" : "configured"})`,
    data: { path: p.path, projector_type: p.projector_type, width: p.width, source: choice.source },
  };
}
