import { deflateSync } from "node:zlib";

/** Raw PDFs for the PDF thread's tests (pdf-thread.test.ts, pdf-gap-probe.ts). */
/** A PDF whose pages' content streams are given raw, each with its own dictionary entries. */
export function pdfOf(pages: { dict: string; data: Uint8Array }[]): Uint8Array {
  const parts: Buffer[] = [];
  const offsets: number[] = [];
  let size = 0;
  const put = (b: Buffer) => {
    parts.push(b);
    size += b.byteLength;
  };
  const obj = (n: number, body: Buffer | string) => {
    offsets[n] = size;
    put(Buffer.from(`${n} 0 obj\n`));
    put(Buffer.isBuffer(body) ? body : Buffer.from(body, "latin1"));
    put(Buffer.from("\nendobj\n"));
  };
  put(Buffer.from("%PDF-1.4\n"));
  const kids = pages.map((_, i) => `${4 + 2 * i} 0 R`).join(" ");
  obj(1, "<< /Type /Catalog /Pages 2 0 R >>");
  obj(2, `<< /Type /Pages /Kids [${kids}] /Count ${pages.length} >>`);
  obj(3, "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>");
  pages.forEach((p, i) => {
    const n = 4 + 2 * i;
    obj(
      n,
      `<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents ${n + 1} 0 R >>`,
    );
    const head = `<< /Length ${p.data.byteLength} ${p.dict} >>\nstream\n`;
    obj(n + 1, Buffer.concat([Buffer.from(head), Buffer.from(p.data), Buffer.from("\nendstream")]));
  });
  const xref = size;
  let table = `xref\n0 ${offsets.length}\n0000000000 65535 f \n`;
  for (let n = 1; n < offsets.length; n++) table += `${String(offsets[n]).padStart(10, "0")} 00000 n \n`;
  put(Buffer.from(`${table}trailer\n<< /Size ${offsets.length} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`));
  return Buffer.concat(parts);
}

/** A page of five million shown strings (40 MB inflated): pdf.js works through it for seconds. */
export const heavyPage = () => ({
  dict: "/Filter /FlateDecode",
  data: deflateSync(Buffer.from(`BT /F1 12 Tf 72 700 Td ${"(ab) Tj ".repeat(5_000_000)}ET`)),
});
