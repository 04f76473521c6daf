import { deflateSync } from "node:zlib";

/** Raw PDFs for the PDF thread's tests (pdf-thread.test.ts, pdf-gap-probe.ts). */
/**
 * A PDF whose pages' content streams are given raw, each with its own dictionary entries (and
 * its own `stream` keyword line when given).
 */
export function pdfOf(pages: { dict: string; data: Uint8Array; keyword?: string }[]): Uint8Array {
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
    const head = `<< /Length ${p.data.byteLength} ${p.dict} >>\n${p.keyword ?? "stream\n"}`;
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

/**
 * A PDF whose page's content stream (object 6) is written inside another stream's data (object
 * 5, ASCIIHex), where the cross-reference table points: the stream pass reads the file in order
 * and steps over object 5's data, pdf.js goes where the table says.
 */
export function hiddenStream(data: Uint8Array, filter = "/FlateDecode"): Uint8Array {
  const parts: Buffer[] = [];
  const offsets: number[] = [];
  let size = 0;
  const put = (b: Buffer | string) => {
    const buf = typeof b === "string" ? Buffer.from(b, "latin1") : b;
    parts.push(buf);
    size += buf.byteLength;
  };
  put("%PDF-1.4\n");
  const objects: [number, string][] = [
    [1, "<< /Type /Catalog /Pages 2 0 R >>"],
    [2, "<< /Type /Pages /Kids [4 0 R] /Count 1 >>"],
    [3, "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"],
    [
      4,
      "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents 6 0 R >>",
    ],
  ];
  for (const [n, body] of objects) {
    offsets[n] = size;
    put(`${n} 0 obj\n${body}\nendobj\n`);
  }
  const inner = Buffer.concat([
    Buffer.from(`6 0 obj\n<< /Length ${data.byteLength} /Filter ${filter} >>\nstream\n`),
    Buffer.from(data),
    Buffer.from("\nendstream\nendobj\n"),
  ]);
  offsets[5] = size;
  put(`5 0 obj\n<< /Length ${inner.byteLength} /Filter /ASCIIHexDecode >>\nstream\n`);
  offsets[6] = size;
  put(inner);
  put("\nendstream\nendobj\n");
  const xref = size;
  let table = "xref\n0 7\n0000000000 65535 f \n";
  for (let n = 1; n <= 6; n++) table += `${String(offsets[n]).padStart(10, "0")} 00000 n \n`;
  put(`${table}trailer\n<< /Size 7 /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`);
  return Buffer.concat(parts);
}
