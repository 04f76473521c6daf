import { createHash } from "node:crypto";
import { dirname, join } from "node:path";
import { within } from "../util/within.ts";
import type { ListedDevice } from "./listed-devices.ts";

/**
 * A CPU build's `--list-devices` answer, `(none)`, remembered across core starts: the listing is
 * the largest single step of a cold chat's way to its spawn (a process start, 20-40 ms on two
 * cores: docs/performance.md, "A cold chat's way to the spawn"). Only `(none)`: a listing with
 * devices carries free VRAM, which moves, and is never remembered. The memo holds for one key
 * (`listingKey`): the binary and its backend libraries as files, the boot, the device-choosing
 * environment the probe's child sees, the OS and arch. What no key sees (a Vulkan ICD or a GPU
 * driver installed without a reboot, an eGPU plugged in) is caught by asking the binary again a
 * while after a plan that used the memo (`recheck`). docs/plan.md, "Which GPUs".
 */

export const MEMO_VERSION = 1;
/** Under data_dir: small state of the core's that is safe to lose. */
export const MEMO_FOLDER = "cache";
export const MEMO_NAME = "list-devices.json";
/** A memo is a line of JSON; anything longer is not one. */
export const MAX_MEMO_BYTES = 4096;
/** The binary's folder read up to this many names; a bigger one (a PATH folder) is no memo. */
export const MAX_FOLDER_ENTRIES = 200;
/** The memo's reads wait this long at most (a data_dir on a dead share): then asked as before. */
export const RECALL_WAIT_MS = 300;
/** How long after a plan that used the memo the binary is asked again, in the background. */
export const RECHECK_AFTER_MS = 15_000;

/** The OS edges the memo reads and writes through (listing-memo-fs.ts; tests hand in fakes). */
export interface MemoEdges {
  platform: string;
  arch: string;
  realpath(path: string): Promise<string>;
  /** Links followed: a library's name links to its versioned file. */
  stat(path: string): Promise<{ size: number; mtimeMs: number; ino: number }>;
  /** Up to `max` names in `dir`; null when there are more. */
  names(dir: string, max: number): Promise<string[] | null>;
  /** This boot: Linux's boot_id, elsewhere its start on the wall clock to the minute. */
  boot(): Promise<string>;
  /** What the probe's child sees of the environment (util/child-allowlist.ts). */
  env(): Record<string, string>;
  /** The memo's text; null when there is none. Throws on a link, a non-file, or over `max` bytes. */
  read(path: string, max: number): Promise<string | null>;
  /**
   * data_dir/cache/list-devices.json, atomically, owner-only, never through a link; off the loop
   * (its drive asked first), and not once `going` says the core stops.
   */
  write(dataDir: string, text: string, going: () => boolean): Promise<void>;
  /** Off the loop: a data_dir on a share gone dead holds a pool thread, never ping. */
  remove(path: string): Promise<void>;
  setTimer(fn: () => void, ms: number): void;
  info(message: string): void;
}

/**
 * Which names in the binary's folder are what it loads at start: its backends (libggml-cpu-*.so,
 * ggml-vulkan.dll…) and any shared library, for the GPU runtimes unpacked beside it
 * (cudart64_12.dll, from llama.cpp's separate cudart zip, without which ggml-cuda.dll fails to
 * load and the listing says `(none)`; libvulkan.so.1). Only those: a README, a log, a lock or a
 * model beside it is no key part, even named `llama…` (one rewritten at each start, a
 * `--log-file`, made a key that no start met again, and the memo never answered).
 */
const BACKEND = /\.(dll|dylib)$|\.so(\.\d+)*$/i;

/** The key a memo holds for: a hash, so the file keeps no paths or environment values. */
export async function listingKey(binary: string, edges: MemoEdges): Promise<string | null> {
  // The boot beside the files: each await is a turn of a loop that a cold start keeps busy.
  const boot = edges.boot();
  boot.catch(() => {});
  // The folder as named read beside its realpath: most often the same one, one turn less.
  const named = edges.names(dirname(binary), MAX_FOLDER_ENTRIES);
  named.catch(() => {});
  const real = await edges.realpath(binary);
  const folder = dirname(real);
  const names = await (folder === dirname(binary) ? named : edges.names(folder, MAX_FOLDER_ENTRIES));
  if (!names) return null;
  const seen = edges.env();
  const paths = [real, ...names.filter((n) => BACKEND.test(n)).map((n) => join(folder, n))];
  const uniq = [...new Set(paths)].sort();
  // The out-of-tree backend ggml loads from GGML_BACKEND_PATH, wherever it is (ggml-backend-reg.cpp
  // `ggml_backend_load_all_from_path`): one rebuilt in place changes no other key part. Missing,
  // its absence is the key part (made later, it is asked again).
  const plugin = Object.entries(seen).find(([name]) => name.toUpperCase() === "GGML_BACKEND_PATH")?.[1];
  // A file whose stat fails (a dangling link to a removed driver's library, loaded by no one) is
  // its error's code: the key holds while it stays so, where one failure threw the key away and
  // the memo never answered on that machine.
  const part = (path: string, name = path) =>
    edges.stat(path).then(
      (s) => [name, s.size, s.mtimeMs, s.ino],
      (err) => [name, (err as { code?: unknown } | null)?.code ?? null],
    );
  const files = await Promise.all([
    ...uniq.map((p) => part(p)),
    ...(plugin ? [part(plugin, "GGML_BACKEND_PATH")] : []),
  ]);
  const env = Object.entries(seen).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const parts = {
    v: MEMO_VERSION,
    os: edges.platform,
    arch: edges.arch,
    boot: await boot,
    files,
    env,
  };
  return createHash("sha256").update(JSON.stringify(parts)).digest("hex");
}

/** The listing report's note on a plan the memo answered (docs/plan.md, "Which GPUs"). */
export const REMEMBERED =
  "remembered from an earlier start (a build with no GPU backend); the binary is asked again in the background";

/** What the memo said for one probe: `key` null, nothing is written after it (no memo here). */
export interface Recall {
  /** The memo holds `(none)` for this key: the binary is not asked. */
  hit: boolean;
  /** The memo held for this key (a probe that asks anyway: doctor, the recheck). */
  held: boolean;
  /** A memo file was there (removed when the listing is not `(none)`; else nothing is touched). */
  present?: boolean;
  key: string | null;
}

const NO_MEMO: Recall = { hit: false, held: false, key: null };
/** A memo read that outlived its wait (`recall`). */
const LATE = Symbol("late");

/** The probe's side of the memo (probe.ts `probeListed`). */
export interface ListingHooks {
  /** The memo answered this probe's listing (doctor then asks the binary: plan/probe-ahead.ts). */
  readonly answered: boolean;
  recall(binary: string): Promise<Recall>;
  learned(binary: string, recall: Recall, listed: ListedDevice[] | null): void;
}

export class ListingMemo {
  private where: { dataDir: string; stopping: () => boolean } | null = null;
  private pending = false;
  /** A memo read that outlived its wait, still unanswered: none begun beside it (`recall`). */
  private late: Promise<unknown> | null = null;
  /**
   * Bumped by each listing that wants the memo gone (`learned`): a write begun before one is
   * dropped when its turn comes, after its drive's check (`MemoEdges.write`'s `going`).
   */
  private removals = 0;
  /**
   * Whether this core began a "none" write: a listing that found devices removes the memo it read
   * absent then too, since that write may have landed after its read (one that did was left,
   * stale, until the recheck). A GPU machine, never writing, still touches no file.
   */
  private wrote = false;

  constructor(
    private readonly edges: MemoEdges,
    /**
     * Asks the binary again, one `--list-devices` at a time (plan/probe-ahead.ts `recheck`);
     * `going`: whether the core still runs when its turn comes, after the probe running.
     */
    private readonly recheck: (binary: string, going: () => boolean) => void,
    private readonly waitMs = RECALL_WAIT_MS,
  ) {}

  /**
   * The memo on, in `dataDir`: serve-stdio's read-ahead turns it on. `local-ai plan` and
   * `doctor` run without it, and always ask the binary.
   */
  serve(dataDir: string, stopping: () => boolean): void {
    this.where = { dataDir, stopping };
  }

  /** Hooks for one probe; `ask`: the binary is asked whatever the memo holds (it is still kept current). */
  hooks(ask: boolean): ListingHooks {
    const hooks = {
      answered: false,
      recall: async (binary: string) => {
        const recall = await this.recall(binary, ask);
        if (recall.hit) hooks.answered = true;
        return recall;
      },
      learned: (binary: string, recall: Recall, listed: ListedDevice[] | null) =>
        this.learned(binary, recall, listed),
    };
    return hooks;
  }

  private async recall(binary: string, ask: boolean): Promise<Recall> {
    const where = this.where;
    // A stopping core neither reads nor writes it: its data_dir may be going (a test's, a host's).
    if (!where || where.stopping()) return NO_MEMO;
    const read = async (): Promise<Recall> => {
      // The memo read beside the key, not after it (a cold start's loop is busy: docs/plan.md).
      const memo = this.edges.read(memoPath(where.dataDir), MAX_MEMO_BYTES);
      memo.catch(() => {});
      const key = await listingKey(binary, this.edges).catch(() => null);
      if (!key) return NO_MEMO;
      let text: string | null;
      try {
        text = await memo;
      } catch {
        return { hit: false, held: false, present: true, key }; // a link, a FIFO, too long: replaced
      }
      const held = text !== null && holds(text, key);
      return { hit: held && !ask, held, present: text !== null, key };
    };
    // One that hangs (a dead share) holds a thread of the runtime's pool until it answers: no
    // other is begun meanwhile, else each plan after held one more, and the core's other file work
    // waited for a free one.
    if (this.late) return NO_MEMO;
    const reading = read().catch(() => NO_MEMO);
    const recall = await within(reading, this.waitMs, LATE);
    // Late: neither used nor written (the drive may not take a write either).
    if (recall === LATE) {
      const late = reading.finally(() => {
        if (this.late === late) this.late = null;
      });
      this.late = late;
      return NO_MEMO;
    }
    if (recall.hit) this.later(binary);
    return recall;
  }

  private learned(binary: string, recall: Recall, listed: ListedDevice[] | null): void {
    const where = this.where;
    // Stopping since it was read: its data_dir may be removed next, and a write would make it again.
    if (!where) return;
    const none = listed !== null && listed.length === 0;
    // Devices now (or no list): a "none" write begun before, still waiting on its drive, must not
    // land after this listing, which read no memo to remove: a stale one was left (a review found
    // it), a listing whose recall had no key (its read late, the binary unread) too.
    if (!none && !recall.hit) this.removals++;
    if (recall.hit || where.stopping()) return;
    // A GPU machine's probes touch no file at all. A removal needs no key (its read late, the
    // binary unread): the devices are listed now whatever the key.
    if (none ? !recall.key || recall.held : !recall.present && !this.wrote) return;
    if (none) this.wrote = true;
    const removals = this.removals;
    const going = () => this.where === where && !where.stopping() && this.removals === removals;
    const done = none
      ? this.edges.write(where.dataDir, memoText(recall.key!), going)
      : this.edges.remove(memoPath(where.dataDir));
    // A memo unwritten (or left) is a listing asked next time: only said.
    void done.then(
      () => recall.held && !none && this.edges.info(changed(binary, listed)),
      (err) =>
        this.edges.info(
          `the device listing memo could not be ${none ? "written" : "removed"} (${(err as Error).message}): llama-server is asked its devices again next time`,
        ),
    );
  }

  /** Once per plan that used the memo, unless one is already waiting. */
  private later(binary: string): void {
    if (this.pending) return;
    this.pending = true;
    this.edges.setTimer(() => {
      this.pending = false;
      const going = () => this.where !== null && !this.where.stopping();
      if (going()) this.recheck(binary, going);
    }, RECHECK_AFTER_MS);
  }
}

/** A failed listing plans the vendor tools' GPUs, not "them": its own words (docs/plan.md). */
function changed(binary: string, listed: ListedDevice[] | null): string {
  return listed
    ? `llama-server now lists devices (${listed.map((d) => `${d.name}: ${d.description}`).join(", ")}) where it listed none: the next model load plans with them (${binary})`
    : `llama-server --list-devices gave no device list where it listed none: the remembered answer is dropped and the next model load asks it again (${binary})`;
}

export function memoPath(dataDir: string): string {
  return join(dataDir, MEMO_FOLDER, MEMO_NAME);
}

function memoText(key: string): string {
  return `${JSON.stringify({ version: MEMO_VERSION, key, devices: "none" })}\n`;
}

function holds(text: string, key: string): boolean {
  try {
    const memo = JSON.parse(text) as unknown;
    if (!memo || typeof memo !== "object") return false;
    const m = memo as Record<string, unknown>;
    return m.version === MEMO_VERSION && m.key === key && m.devices === "none";
  } catch {
    return false;
  }
}
