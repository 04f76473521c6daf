/**
 * HTML's names that start with one of LEGACY's (`&ltimes;` is ⋉): browsers read the longest name,
 * so these are theirs, not the legacy name and the rest (they were made `<imes;`, `×b;`, `©sr;`).
 */
const LEGACY_LOOKALIKES: Record<string, string> = {
  copysr: "\u2117",
  gtcc: "\u2aa7",
  gtcir: "\u2a7a",
  gtdot: "\u22d7",
  gtlPar: "\u2995",
  gtquest: "\u2a7c",
  gtrapprox: "\u2a86",
  gtrarr: "\u2978",
  gtrdot: "\u22d7",
  gtreqless: "\u22db",
  gtreqqless: "\u2a8c",
  gtrless: "\u2277",
  gtrsim: "\u2273",
  ltcc: "\u2aa6",
  ltcir: "\u2a79",
  ltdot: "\u22d6",
  lthree: "\u22cb",
  ltimes: "\u22c9",
  ltlarr: "\u2976",
  ltquest: "\u2a7b",
  ltrPar: "\u2996",
  ltri: "\u25c3",
  ltrie: "\u22b4",
  ltrif: "\u25c2",
  timesb: "\u22a0",
  timesbar: "\u2a31",
  timesd: "\u2a30",
  centerdot: "\u00b7",
  divideontimes: "\u22c7",
  notin: "\u2209",
  notinE: "\u22f9\u0338",
  notindot: "\u22f5\u0338",
  notinva: "\u2209",
  notinvb: "\u22f7",
  notinvc: "\u22f6",
  notni: "\u220c",
  notniva: "\u220c",
  notnivb: "\u22fe",
  notnivc: "\u22fd",
  parallel: "\u2225",
};

/**
 * Latin-1's names, U+00A0 to U+00FF in order: all legacy ones in HTML, and what pages in French,
 * German or Spanish write (`caf&eacute;`, `&Uuml;ber`), the markup indexed where readers see letters.
 */
const LATIN_1 = (
  "nbsp iexcl cent pound curren yen brvbar sect uml copy ordf laquo not shy reg macr deg plusmn " +
  "sup2 sup3 acute micro para middot cedil sup1 ordm raquo frac14 frac12 frac34 iquest Agrave " +
  "Aacute Acirc Atilde Auml Aring AElig Ccedil Egrave Eacute Ecirc Euml Igrave Iacute Icirc Iuml " +
  "ETH Ntilde Ograve Oacute Ocirc Otilde Ouml times Oslash Ugrave Uacute Ucirc Uuml Yacute THORN " +
  "szlig agrave aacute acirc atilde auml aring aelig ccedil egrave eacute ecirc euml igrave iacute " +
  "icirc iuml eth ntilde ograve oacute ocirc otilde ouml divide oslash ugrave uacute ucirc uuml " +
  "yacute thorn yuml"
).split(" ");

/**
 * HTML's character references in text: numeric ones, and the named ones text commonly holds
 * (a full table is 2,000 names for little gain); an unknown name is left as written.
 */
const NAMED: Record<string, string> = {
  amp: "&",
  lt: "<",
  gt: ">",
  quot: '"',
  apos: "'",
  mdash: "—",
  ndash: "–",
  hellip: "…",
  lsquo: "‘",
  rsquo: "’",
  ldquo: "“",
  rdquo: "”",
  trade: "™",
  bull: "•",
  euro: "€",
  // HTML's uppercase forms, legacy as their lowercase ones are; no other case of a name is HTML's.
  AMP: "&",
  LT: "<",
  GT: ">",
  QUOT: '"',
  COPY: "©",
  REG: "®",
  ...LEGACY_LOOKALIKES,
  ...Object.fromEntries(LATIN_1.map((name, i) => [name, String.fromCharCode(0xa0 + i)])),
};

/**
 * The table's names that HTML also reads without their `;` in text (WHATWG's legacy ones): old
 * pages write `&nbsp`, `&copy 2024`, `AT&amp T` and `&#146` bare, and browsers show them decoded.
 * Case counts, as in HTML: `&AMP` is one, `&Amp` is none.
 */
const LEGACY = ["amp", "lt", "gt", "quot", "AMP", "LT", "GT", "QUOT", "COPY", "REG", ...LATIN_1].join("|");
// A number's digits all read, as browsers do (one past U+10FFFF is U+FFFD): cut at a count with
// the `;` optional, `&#00000065;` kept its last digit and `;` as text. A name as long as HTML's
// longest, digits in it (`frac12`): cut at 8 letters, `&gtreqqless;` was read as `&gt` and text.
const REFERENCE = new RegExp(
  `&(?:(#[xX][0-9a-fA-F]+|#[0-9]+);?|([a-zA-Z][a-zA-Z0-9]{1,31});|(${LEGACY}))`,
  "g",
);
const LEGACY_PREFIX = new RegExp(`^(${LEGACY})`);

export function decodeEntities(text: string): string {
  if (!text.includes("&")) return text;
  return text.replace(REFERENCE, (whole, num?: string, name?: string, bare?: string) => {
    if (bare !== undefined) return NAMED[bare] as string;
    if (name !== undefined) {
      if (NAMED[name] !== undefined) return NAMED[name];
      // `&nbspx;`: no such name, so the legacy one it starts with, as browsers read it.
      const legacy = LEGACY_PREFIX.exec(name)?.[1];
      return legacy === undefined ? whole : (NAMED[legacy] as string) + whole.slice(legacy.length + 1);
    }
    const ref = num as string;
    const code = ref[1] === "x" || ref[1] === "X" ? Number.parseInt(ref.slice(2), 16) : Number(ref.slice(1));
    const valid = code > 0 && code <= 0x10ffff && !(code >= 0xd800 && code <= 0xdfff);
    if (!valid) return "\uFFFD";
    return code >= 0x80 && code <= 0x9f
      ? (WINDOWS_1252_C1[code - 0x80] as string)
      : String.fromCodePoint(code);
  });
}

/**
 * What HTML makes of a reference to 128-159 (the C1 controls): Windows-1252's character, as
 * browsers read `&#146;` (’) in legacy pages (WHATWG's numeric character reference end state);
 * its five undefined bytes stay the control they name, as there.
 */
const WINDOWS_1252_C1 = Array.from(
  new TextDecoder("windows-1252").decode(Uint8Array.from({ length: 32 }, (_, i) => 0x80 + i)),
);
