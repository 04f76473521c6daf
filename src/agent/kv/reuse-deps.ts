import type { Config } from "../../config/schema.ts";
import type { KvDisk } from "./kv-disk.ts";
import type { PromptRecord } from "./prompt-record.ts";
import type { QuietSave } from "./quiet-timer.ts";

/** What prompt reuse (reuse.ts) is given: the server's settings, the KV folder, the store's answers. */
export interface ReuseDeps {
  llama: Config["llama"];
  /** None when `llama.kv_disk_bytes` is 0: slots and records only, nothing on disk. */
  disk: KvDisk | null;
  /** The running server's `--cache-ram` in bytes; null when unknown (a server not planned here). */
  cacheRamBytes(): number | null;
  /**
   * Whether the session is still in the database (another core may have erased it), no other
   * core holds its lease (it took the session over from this one, frozen past the lease: its turn
   * is newer than this slot), and, given `since` (`mark` as the slot's last turn ended), no edit
   * erased its tail after that (another core's: this slot holds the tail); none: yes.
   */
  stored?: (userId: string, sessionId: string, since?: number) => boolean;
  /** The store's erase mark now (store/erasures.ts `erasureMark`); undefined: cannot tell. */
  mark?: () => number | undefined;
  /** Of the sources a record's notes quote (with their passages' rows), those no longer stored; null: cannot tell. */
  gone?: (userId: string, quoted: ReadonlyMap<string, readonly number[]>) => string[] | null;
  now?: () => number;
  /** The idle wait before the quiet save, in ms, before the `idle_sleep_s` rule; default 2 s (tests shorten it). */
  quietMs?: number;
  /** Tests: each quiet save as its timer is set, to await it or fire it now; none in the core. */
  quietSeen?: (quiet: QuietSave) => void;
}

const QUIET_MS = 2000;

/** How long the server stays idle before the quiet save (reuse.ts): 2 s, or a quarter of `idle_sleep_s` if shorter. */
export function quietDelay(deps: Pick<ReuseDeps, "llama" | "quietMs">): number {
  const base = deps.quietMs ?? QUIET_MS;
  const idleMs = deps.llama.idle_sleep_s * 1000;
  return idleMs > 0 ? Math.min(base, idleMs / 4) : base;
}

/** What a turn gets: its slot and its session's prompt record, and how it says it is over. */
export interface ReusedTurn {
  slot: number | undefined;
  record: PromptRecord;
  /**
   * llama-server took up a request of the turn (answered 2xx): what the slot held before the
   * turn is replaced. Sent but never taken up (refused, failed first), it holds what it did.
   */
  started(): void;
  /**
   * The turn is over (before its lease goes): the record it leaves, whether it sent a request,
   * and `lost`: another core took its session over (its slot is then never saved). No record:
   * its setup failed before it laid out a prompt (nothing sent), as `abandon`; left busy, the
   * slot was no turn's again and nothing was ever saved quietly.
   */
  end(record: PromptRecord | undefined, sent: boolean, lost?: boolean): void;
  /** Void, nothing sent: its server died first (a restore that killed it, 93f). No record is kept. */
  abandon(): void;
}
