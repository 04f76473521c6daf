/**
 * A bound on what pdf.js decodes (docs/agent.md "Documents"), put in on the PDF's thread only.
 * pdf.js decodes a stream either through the platform's `DecompressionStream`, gathering every
 * chunk it gives before making one buffer of their total, or with its own decoder, into one
 * buffer it doubles as the stream grows (`DecodeStream.ensureBuffer`, a `new Uint8Array(n)` each
 * time); it has no limit of its own. The stream pass (`pdf-streams.ts`) measures streams before
 * pdf.js reads the file, but it reads the file in order, as text, where pdf.js goes where the
 * cross-reference table points: into another stream's data, or to a filter named inside a
 * compressed object stream. So, on this thread, there is no `DecompressionStream` (pdf.js
 * decodes with its own decoder), and `Uint8Array` refuses a new, empty array longer than
 * `maxBytes` (the doubling that would pass it throws, and pdf.js gives up the stream). The
 * reader, told the cap was met, refuses the file as `too_large`. Arrays made from data (a copy,
 * a view) are never refused. The thread runs pdf.js and nothing else; what the cap cannot see
 * (a decoder gathering small pieces) the thread's memory watch bounds (`pdf-pages.ts`).
 */
export interface AllocationCap {
  /** Whether a length past the cap was asked for since the cap was put in. */
  met(): boolean;
}

interface Globals {
  Uint8Array: Uint8ArrayConstructor;
  DecompressionStream?: typeof DecompressionStream;
}

export function capPdfThread(maxBytes: number, global: Globals): AllocationCap {
  let met = false;
  const original = global.Uint8Array;
  global.Uint8Array = new Proxy(original, {
    construct(target, args, newTarget) {
      const length = args[0];
      if (typeof length === "number" && length > maxBytes) {
        met = true;
        throw new RangeError(`a buffer of ${length} bytes is over the ${maxBytes} a PDF's stream may use`);
      }
      return Reflect.construct(target, args, newTarget);
    },
  });
  // Without it pdf.js falls back to its own decoder (it tries the platform's first, and any
  // failure there sends it back), whose one growing buffer the cap above bounds.
  global.DecompressionStream = undefined;
  return { met: () => met };
}
