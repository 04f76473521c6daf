import { MAX_JPEG_SCANS } from "./limits.ts";

/** Bytes walked between two turns of the event loop (a 20 MB JPEG is ~35 ms of walking). */
const BYTES_A_SLICE = 2 * 1024 * 1024;

/**
 * Whether a JPEG has over MAX_JPEG_SCANS scans (SOS markers) before its EOI (cameras append
 * trailers after it): llama-server's decoder (stb_image) passes over every block of the image for
 * each scan, however few bytes the scan holds (limits.ts). Every 0xFF is looked at, as stb_image
 * does, not only where a segment's length says the next marker is: it skips bytes between
 * segments, so a stray byte must not end the count. A stuffed 0x00, a restart marker (or SOI,
 * TEM) has no length; any other marker's segment is skipped by it, a scan's header included (its
 * entropy-coded data follows). A plain loop, not `indexOf` per 0xFF: 20 MB of stuffed 0xFF 0x00
 * pairs is ten million of them; the event loop is given back every BYTES_A_SLICE.
 */
export async function jpegScansOver(b: Uint8Array): Promise<boolean> {
  let scans = 0;
  let at = 2;
  let slice = BYTES_A_SLICE;
  while (scans <= MAX_JPEG_SCANS) {
    if (at >= slice) {
      await new Promise((r) => setImmediate(r));
      slice = at + BYTES_A_SLICE;
    }
    // Within the slice: a run with no marker (entropy data, fill bytes) may be megabytes long.
    const stop = Math.min(b.length, slice);
    while (at < stop && b[at] !== 0xff) at++;
    while (at < stop && b[at] === 0xff) at++;
    if (at >= b.length) break;
    // The slice's end: the loop turns, then the walk goes on here; but a marker the run of 0xFF
    // ended on, right at it, is read now (from here, it would be skipped as a stray byte).
    if (at === stop && !(b[at - 1] === 0xff && b[at] !== 0xff)) continue;
    const marker = b[at] as number;
    if (marker === 0xd9) break;
    if (marker === 0x00 || marker === 0x01 || (marker >= 0xd0 && marker <= 0xd8)) {
      at++;
      continue;
    }
    if (marker === 0xda) scans++;
    if (at + 2 >= b.length) break;
    at += 1 + ((b[at + 1] as number) << 8) + (b[at + 2] as number);
  }
  return scans > MAX_JPEG_SCANS;
}
