/**
 * At most `max` bytes of a response body; `over` when it had more, and the rest is then never
 * read (the body is cancelled). A hub's error page or listing that never ends is so bounded in
 * memory, not only in time: a time limit alone let a fast hub fill gigabytes before it fired.
 */
export async function readCapped(res: Response, max: number): Promise<{ bytes: Uint8Array; over: boolean }> {
  if (!res.body) return { bytes: new Uint8Array(0), over: false };
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return { bytes: Buffer.concat(chunks, size), over: false };
      if (size + value.byteLength > max) {
        chunks.push(value.subarray(0, max - size));
        return { bytes: Buffer.concat(chunks, max), over: true };
      }
      chunks.push(value);
      size += value.byteLength;
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}
