/**
 * The in-memory half of vector recall (docs/agent.md, "Memory"): one sign bit per dimension of
 * each stored vector (768 dimensions: 24 words, 96 bytes), searched by Hamming distance. It
 * only nominates candidates; the caller rescores them with the exact float vectors and filters
 * them through the scope's SQL, so a stale entry here costs a candidate, never a wrong answer.
 * Pure: no SQLite, no clock.
 */

/** The sign bits of a vector: bit i set when component i is positive. */
export function signBits(vector: ArrayLike<number>, words = wordsFor(vector.length)): Int32Array {
  const out = new Int32Array(words);
  for (let i = 0; i < vector.length; i++) {
    if ((vector[i] as number) > 0) out[i >>> 5] = (out[i >>> 5] as number) | (1 << (i & 31));
  }
  return out;
}

export function wordsFor(dimensions: number): number {
  return Math.ceil(dimensions / 32);
}

/**
 * Set bits of every 16-bit number: a word's count is two lookups (JavaScript has no popcount;
 * measured faster here than the shift-and-mask way: bench/retrieval.ts).
 */
const BITS16 = (() => {
  const t = new Uint8Array(65536);
  for (let i = 1; i < 65536; i++) t[i] = (i & 1) + (t[i >>> 1] as number);
  return t;
})();

/** Between a key and its part in an owner (`ownerKey`): NUL, which no id may hold. */
const PART = "\u0000";

/**
 * An entry's owner: its key (a user), or a part of the key (a user's session), so that a scan
 * of a key can leave one part out without widening: one long conversation's own turns would
 * otherwise fill every candidate list of its recall.
 */
export function ownerKey(key: string, part?: string): string {
  return part ? `${key}${PART}${part}` : key;
}

export class SignIndex {
  readonly words: number;
  private ids: Float64Array;
  /** An interned owner per entry (`ownerKey`): a scan may be limited to some owners. */
  private owners: Int32Array;
  /** Int32, not Uint32: a word over 2^31 read from a Uint32Array is a heap number, several times slower. */
  private bits: Int32Array;
  private count = 0;
  private readonly at = new Map<number, number>();
  private readonly ownerCodes = new OwnerCodes();
  /** Scratch for one scan's distances, grown with the index. */
  private distances: Uint16Array;

  constructor(
    readonly dimensions: number,
    capacity = 1024,
  ) {
    this.words = wordsFor(dimensions);
    this.ids = new Float64Array(capacity);
    this.owners = new Int32Array(capacity);
    this.bits = new Int32Array(capacity * this.words);
    this.distances = new Uint16Array(capacity);
  }

  get size(): number {
    return this.count;
  }

  /** Owners holding at least one entry (interned ids are forgotten with their last entry). */
  get ownersKnown(): number {
    return this.ownerCodes.size;
  }

  has(id: number): boolean {
    return this.at.has(id);
  }

  /** Bytes held: the bits, ids, owners and scratch (the Map's entries add about 40 bytes each). */
  bytes(): number {
    return this.bits.byteLength + this.ids.byteLength + this.owners.byteLength + this.distances.byteLength;
  }

  /** Adds or replaces the entry of `id`; `bits` from `signBits`, of this index's width. */
  put(id: number, owner: string, bits: Int32Array): void {
    if (bits.length !== this.words)
      throw new Error(`sign bits of ${bits.length} words; this index has ${this.words}`);
    const code = this.ownerCodes.take(owner);
    let slot = this.at.get(id);
    if (slot === undefined) {
      if (this.count === this.ids.length) this.grow();
      slot = this.count++;
      this.at.set(id, slot);
      this.ids[slot] = id;
    } else this.ownerCodes.release(this.owners[slot] as number);
    this.owners[slot] = code;
    this.bits.set(bits, slot * this.words);
  }

  /** Drops `id`'s entry (the last entry moves into its place). */
  remove(id: number): void {
    const slot = this.at.get(id);
    if (slot === undefined) return;
    this.at.delete(id);
    this.ownerCodes.release(this.owners[slot] as number);
    const last = --this.count;
    if (slot !== last) {
      const lastId = this.ids[last] as number;
      this.ids[slot] = lastId;
      this.owners[slot] = this.owners[last] as number;
      this.bits.copyWithin(slot * this.words, last * this.words, (last + 1) * this.words);
      this.at.set(lastId, slot);
    }
  }

  /**
   * The ids of the `n` entries nearest `query` by Hamming distance (ties broken by position),
   * among those whose owner is one of `owners` (all when undefined), less those of the owner
   * `skip`; nearest first.
   */
  nearest(query: Int32Array, n: number, owners?: readonly string[], skip?: string): number[] {
    if (n <= 0 || this.count === 0) return [];
    const allowed = this.allowedCodes(owners, skip);
    const { words, bits, count } = this;
    const dist = this.distances;
    const histogram = new Uint32Array(words * 32 + 2);
    const excluded = words * 32 + 1;
    const ownerOf = this.owners;
    for (let slot = 0; slot < count; slot++) {
      if (allowed[ownerOf[slot] as number] === 0) {
        dist[slot] = excluded;
        continue;
      }
      let d = 0;
      const base = slot * words;
      for (let w = 0; w < words; w++) {
        const x = (bits[base + w] as number) ^ (query[w] as number);
        d += (BITS16[x & 0xffff] as number) + (BITS16[x >>> 16] as number);
      }
      dist[slot] = d;
      histogram[d] = (histogram[d] as number) + 1;
    }
    // The distance at which n entries are reached, by counting (distances are small integers).
    let threshold = 0;
    for (let seen = 0; threshold < excluded; threshold++) {
      seen += histogram[threshold] as number;
      if (seen >= n) break;
    }
    const picked: number[] = [];
    for (let slot = 0; slot < count; slot++) {
      const d = dist[slot] as number;
      if (d <= threshold && d !== excluded) picked.push(slot);
    }
    picked.sort((a, b) => (dist[a] as number) - (dist[b] as number) || a - b);
    return picked.slice(0, n).map((slot) => this.ids[slot] as number);
  }

  /**
   * A flag per owner code: 1 where the scan looks. An owner is a key or a key's part
   * (`ownerKey`): `owners` names keys, and each takes its parts too; every owner when undefined.
   */
  private allowedCodes(owners: readonly string[] | undefined, skip: string | undefined): Uint8Array {
    const codes = new Uint8Array(this.ownerCodes.span + 1);
    if (!owners) codes.fill(1);
    else {
      const keys = new Set(owners);
      for (let code = 0; code < this.ownerCodes.span; code++) {
        const key = this.ownerCodes.keyAt(code);
        if (key !== undefined && keys.has(key)) codes[code] = 1;
      }
    }
    const skipped = skip === undefined ? undefined : this.ownerCodes.codeOf(skip);
    if (skipped !== undefined) codes[skipped] = 0;
    return codes;
  }

  private grow(): void {
    const capacity = this.ids.length * 2;
    const ids = new Float64Array(capacity);
    ids.set(this.ids);
    const owners = new Int32Array(capacity);
    owners.set(this.owners);
    const bits = new Int32Array(capacity * this.words);
    bits.set(this.bits);
    this.ids = ids;
    this.owners = owners;
    this.bits = bits;
    this.distances = new Uint16Array(capacity);
  }
}

/**
 * Owners interned as small codes, each with its count of entries. A core runs for days while
 * users come and go: an owner whose last entry is removed (users.delete's rows, through the
 * deletion log) is forgotten and its code given to the next new owner, so neither the table
 * nor a scan's flags grow with every user id ever seen, and an erased user's id is not kept.
 */
class OwnerCodes {
  private readonly byOwner = new Map<string, number>();
  private readonly names: (string | undefined)[] = [];
  private readonly keys: (string | undefined)[] = [];
  private readonly uses: number[] = [];
  private readonly free: number[] = [];

  get size(): number {
    return this.byOwner.size;
  }

  /** One past the highest code handed out: a scan's flags cover them all. */
  get span(): number {
    return this.names.length;
  }

  codeOf(owner: string): number | undefined {
    return this.byOwner.get(owner);
  }

  /** The key of the code's owner (`ownerKey`'s first part), or undefined for a free code. */
  keyAt(code: number): string | undefined {
    return this.keys[code];
  }

  /** The owner's code, counting one more entry of it. */
  take(owner: string): number {
    let code = this.byOwner.get(owner);
    if (code === undefined) {
      code = this.free.pop() ?? this.names.length;
      this.byOwner.set(owner, code);
      this.names[code] = owner;
      const cut = owner.indexOf(PART);
      this.keys[code] = cut < 0 ? owner : owner.slice(0, cut);
      this.uses[code] = 0;
    }
    this.uses[code] = (this.uses[code] as number) + 1;
    return code;
  }

  /** One entry of the code's owner gone; the owner with it once none is left. */
  release(code: number): void {
    const left = (this.uses[code] as number) - 1;
    this.uses[code] = left;
    if (left > 0) return;
    this.byOwner.delete(this.names[code] as string);
    this.names[code] = undefined;
    this.keys[code] = undefined;
    this.free.push(code);
  }
}

/** Cosine similarity of two L2-normalized vectors: their dot product. */
export function dot(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let s = 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) s += (a[i] as number) * (b[i] as number);
  return s;
}
