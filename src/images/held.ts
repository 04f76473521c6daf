import { stat } from "node:fs/promises";
import type { ImageInput } from "../protocol/image-input.ts";
import { abortable } from "../util/abortable.ts";
import { ByteBudget } from "../util/byte-budget.ts";
import { windowsDevicePath } from "../util/device-path.ts";
import { heldWhile } from "../util/held-while.ts";
import type { Release } from "../util/semaphore.ts";
import { within } from "../util/within.ts";
import { MAX_HELD_IMAGE_BYTES, MAX_IMAGE_BYTES } from "./limits.ts";

/** The chats' images held in memory at once, by their sizes: the others wait their turn. */
export const heldImages = new ByteBudget(MAX_HELD_IMAGE_BYTES);

/** The last chat's sizing: the next enters `heldImages`' line after it (`holdImages`). */
let entered: Promise<unknown> = Promise.resolve();

/**
 * How long the line waits for an image file's size: a stat on a dead network mount can hang for
 * minutes, and every image chat after it would wait as long.
 */
export const STAT_WAIT_MS = 2000;

/** Tests: the stat and its wait. */
export interface SizeOptions {
  stat?: (path: string) => Promise<{ size: number }>;
  statWaitMs?: number;
}

/**
 * A chat's room: its release, what each image may take of it when read (`room[i]`), and `track`
 * for each read: the room is given back once released and every read tracked has ended (a read a
 * cancel stopped waiting for still fills its bytes when the drive answers).
 */
export interface HeldRoom {
  release: Release;
  room: readonly number[];
  track: <T>(read: Promise<T>) => Promise<T>;
  /**
   * Image `index` read to `bytes`: its room past them is given back (a stat of 0 or none in time
   * held the most an image may take, 20 MB a tiny file, all the turn long).
   */
  readBytes: (index: number, bytes: number) => void;
}

/**
 * Holds room for a chat's images before they are read, released when its turn ends
 * (docs/protocol.md#images): what each will take, a file by its size on disk and base64 by its
 * length, each at most MAX_IMAGE_BYTES. All at once, so two chats never each hold part of what
 * they need and wait on the other. More images than `maxImages` hold nothing: they are refused.
 * A file is then read up to its room only (images/prepare.ts): one that grew while its chat
 * waited would otherwise hold megabytes on a room of bytes, and a burst of them grow the core
 * past MAX_HELD_IMAGE_BYTES.
 */
export async function holdImages(
  inputs: readonly ImageInput[],
  maxImages: number,
  signal: AbortSignal,
  options: SizeOptions = {},
): Promise<HeldRoom> {
  if (inputs.length > maxImages)
    return { release: () => {}, room: [], track: (read) => read, readBytes: () => {} };
  // Into the line in the order called, whatever each one's stat takes: a chat holds its
  // session's place before this (methods/chat.ts), so a later chat of the session that got room
  // first while waiting for that place would hold the earlier one's room from it for good.
  // A chat cancelled meanwhile (its stat stuck on a slow disk) leaves that line at once too.
  const sized = Promise.all(inputs.map((input) => expectedBytes(input, options)));
  const inTurn = abortable(
    entered.then(() => sized),
    signal,
  );
  entered = inTurn.catch(() => {});
  const room = (await inTurn).map((bytes) => Math.min(bytes, MAX_IMAGE_BYTES));
  const admitted = await heldImages.acquire(
    room.reduce((a, b) => a + b, 0),
    signal,
  );
  // What the images still hold: each read lowers its own share once, to the bytes it read.
  const holding = [...room];
  const readBytes = (index: number, bytes: number) => {
    const had = holding[index];
    if (had === undefined || bytes >= had) return;
    holding[index] = bytes;
    admitted.lower(holding.reduce((a, b) => a + b, 0));
  };
  return { ...heldWhile(admitted), room, readBytes };
}

async function expectedBytes(input: ImageInput, o: SizeOptions): Promise<number> {
  if (typeof input.data === "string") return Math.floor((input.data.length * 3) / 4);
  // A pipe or a device is never stat'ed (its stat connects to it): its read refuses it.
  if (typeof input.path !== "string" || windowsDevicePath(input.path)) return 0;
  // A failure: the reading refuses it, naming the image. No answer in time: the most an image may
  // take, so the chats behind go on; its own read then waits for the file alone. A size of 0:
  // that most too, as a document's (some file systems' files say 0 and have more; a room of 0
  // refused them as grown).
  const size = (o.stat ?? stat)(input.path).then(
    (s) => s.size || MAX_IMAGE_BYTES,
    () => 0,
  );
  return within(size, o.statWaitMs ?? STAT_WAIT_MS, MAX_IMAGE_BYTES);
}
