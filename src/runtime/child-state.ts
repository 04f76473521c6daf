/**
 * The state lines llama-server prints on stdout as a router's child
 * (test/fixtures/llama-server/transcripts/90; llama.cpp's server-context.cpp
 * `load_progress_callback`, server.cpp): `cmd_child_to_router:state:{json}` with `state` one of
 * `loading` (payload `{stages, current, value}`: `value` 0–1 within the stage `current`, at most
 * one line per 200 ms, the first and the last always), `ready` (the model's card after a start,
 * null after a wake) and `sleeping`. Pure: lines in, states out.
 */

export const STATE_PREFIX = "cmd_child_to_router:state:";

export type ChildState =
  | {
      state: "loading";
      /** Every stage of this load, in the order they load (text_model, spec_model, mmproj_model). */
      stages: string[] | undefined;
      /** The stage the value is of (`current`; a bare `stage` on the mmproj line). */
      stage: string | undefined;
      value: number | undefined;
    }
  | { state: "ready" }
  | { state: "sleeping" }
  /** A state line this core does not know (a later build's, or cut short): it speaks child mode all the same. */
  | { state: "other" };

/** The state a line carries; null when it is not a state line. */
export function parseStateLine(line: string): ChildState | null {
  if (!line.startsWith(STATE_PREFIX)) return null;
  let data: unknown;
  try {
    data = JSON.parse(line.slice(STATE_PREFIX.length));
  } catch {
    return { state: "other" };
  }
  const { state, payload } = (typeof data === "object" && data !== null ? data : {}) as Record<
    string,
    unknown
  >;
  if (state === "ready" || state === "sleeping") return { state };
  if (state !== "loading") return { state: "other" };
  const p = (typeof payload === "object" && payload !== null ? payload : {}) as Record<string, unknown>;
  const stages = Array.isArray(p.stages)
    ? p.stages.filter((s): s is string => typeof s === "string")
    : undefined;
  const named = typeof p.current === "string" ? p.current : typeof p.stage === "string" ? p.stage : undefined;
  const value = typeof p.value === "number" && Number.isFinite(p.value) ? p.value : undefined;
  return { state: "loading", stages, stage: named, value };
}

/**
 * One load's progress as a single fraction: each stage an equal share, in the order listed
 * (the order they load), so with stages [text_model, mmproj_model] the text model's half-way
 * reads 0.25 and the projector's start 0.5. Equal shares rather than by size: the line names
 * no sizes, and the text model, which is most of the bytes, loads first. Never goes back within a
 * load (a stage's repeated 0.0 line, test/fixtures/llama-server/transcripts/90); a new load starts
 * at reset().
 */
export class LoadGauge {
  private stages: string[] = [];
  private fraction: number | undefined;

  heard(s: Extract<ChildState, { state: "loading" }>): void {
    if (s.stages && s.stages.length > 0) this.stages = s.stages;
    const n = Math.max(1, this.stages.length);
    const at = s.stage === undefined ? 0 : Math.max(0, this.stages.indexOf(s.stage));
    const within = Math.min(1, Math.max(0, s.value ?? 0));
    const next = Math.min(1, (at + within) / n);
    this.fraction = Math.max(this.fraction ?? 0, next);
  }

  /** The share of the load done; undefined before its first line. */
  get value(): number | undefined {
    return this.fraction;
  }

  reset(): void {
    this.fraction = undefined;
  }
}

/**
 * One launch's state lines: whether it speaks child mode at all (any state line), the load's
 * gauge, and where the states go once it serves (the idle-sleep watch).
 */
export class StateLines {
  speaks = false;
  readonly load = new LoadGauge();
  /** Set once the server is ready: idle sleep and wake as llama-server pushes them. */
  onState: ((s: ChildState) => void) | undefined;

  /** Takes a stdout line; true when it was a state line (not log output). */
  take(line: string): boolean {
    const s = parseStateLine(line);
    if (s === null) return false;
    this.speaks = true;
    // A wake's load is a new load: it counts from 0 again.
    if (s.state === "sleeping") this.load.reset();
    if (s.state === "loading") this.load.heard(s);
    this.onState?.(s);
    return true;
  }
}
