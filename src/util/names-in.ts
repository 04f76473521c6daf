import { readdirSync } from "node:fs";

/** A folder's entries' names; none where it is missing or cannot be read (a sweep then has nothing to do). */
export function namesIn(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}
