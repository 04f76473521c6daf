import type { Decision } from "../../protocol/plan.ts";

/**
 * What each planner decision returns: its value for the plan, and the line of the report that
 * explains it (the flags it produces and why). Decisions are pure and tested one by one.
 */
export interface Decided<T> {
  value: T;
  decision: Decision;
}
