// tiktoken's rank-based BPE (dwstok models, GPT-2, o200k), written out because
// js-tiktoken 1.0.21 was too slow for this page: 1.0 s to load GPT-2's ranks in node (Map
// keys built with Array.join), and its merge loop re-joins every pair after every merge, so
// a 3,000-character piece of dev took 104 s. Here ranks are keyed by the token's bytes as a
// "binary string" (slices of one atob output), short pieces merge as tiktoken does, long ones through a
// heap. Same answer: the lowest-ranked adjacent pair merges first, the leftmost on ties.
const utf8 = new TextEncoder();
const ASCII = /^[\x00-\x7f]*$/;
const SHORT = 64;
const CACHE_SIZE = 1 << 16; // pieces // bytes: below this the plain scan is faster than the heap

function binary(s) {
  if (ASCII.test(s)) return s;
  const b = utf8.encode(s);
  let out = "";
  for (let i = 0; i < b.length; i += 8192) out += String.fromCharCode.apply(null, b.subarray(i, i + 8192));
  return out;
}

export class RankBPE {
  constructor({ pat_str, ranks }) {
    this.ranks = new Map(); // bytes (binary string) -> rank
    this.tokens = []; // rank -> bytes (binary string)
    const all = atob(ranks.bytes);
    let k = 0;
    let off = 0;
    for (const [first, count] of ranks.runs) {
      for (let r = first; r < first + count; r++, k++) {
        const s = all.slice(off, off + ranks.lengths[k]);
        off += ranks.lengths[k];
        this.ranks.set(s, r);
        this.tokens[r] = s;
      }
    }
    this.regex = new RegExp(pat_str, "gu");
    // Ids of pieces merged before: as the user types, all but the edited pieces are here.
    this.cache = new Map();
  }

  /** The bytes of rank ``id``, or undefined. */
  bytesOf(id) {
    const s = this.tokens[id];
    if (s === undefined) return undefined;
    const b = new Uint8Array(s.length);
    for (let i = 0; i < s.length; i++) b[i] = s.charCodeAt(i);
    return b;
  }

  encode(text) {
    const out = [];
    const re = this.regex;
    re.lastIndex = 0;
    let m;
    while ((m = re.exec(text)) !== null) {
      if (m[0].length === 0) {
        re.lastIndex++; // the patterns never match empty; guard against a loop anyway
        continue;
      }
      const piece = binary(m[0]);
      const r = this.ranks.get(piece);
      if (r !== undefined) {
        out.push(r);
        continue;
      }
      let ids = this.cache.get(piece);
      if (ids === undefined) {
        ids = [];
        if (piece.length < SHORT) this.mergeShort(piece, ids);
        else this.mergeLong(piece, ids);
        if (this.cache.size >= CACHE_SIZE) this.cache.clear();
        this.cache.set(piece, ids);
      }
      for (const id of ids) out.push(id);
    }
    return out;
  }

  rank(piece, a, b) {
    const r = this.ranks.get(piece.slice(a, b));
    return r === undefined ? Infinity : r;
  }

  // tiktoken's loop: part boundaries, and the rank of each pair of neighbouring parts.
  mergeShort(piece, out) {
    const starts = [];
    const ranks = [];
    for (let i = 0; i <= piece.length; i++) starts.push(i);
    for (let i = 0; i + 2 <= piece.length; i++) ranks.push(this.rank(piece, i, i + 2));
    for (;;) {
      let best = Infinity;
      let k = -1;
      for (let i = 0; i < ranks.length; i++) {
        if (ranks[i] < best) {
          best = ranks[i];
          k = i;
        }
      }
      if (k < 0) break;
      starts.splice(k + 1, 1);
      ranks.splice(k, 1);
      if (k < ranks.length) ranks[k] = k + 2 < starts.length ? this.rank(piece, starts[k], starts[k + 2]) : Infinity;
      if (k > 0) ranks[k - 1] = this.rank(piece, starts[k - 1], starts[k + 1]);
    }
    for (let i = 0; i + 1 < starts.length; i++) out.push(this.ranks.get(piece.slice(starts[i], starts[i + 1])));
  }

  // The same merges through a binary heap of (rank, start) with stale entries skipped:
  // parts are a linked list; a part's version changes when its end does.
  mergeLong(piece, out) {
    const n = piece.length;
    const next = new Int32Array(n + 1);
    const prev = new Int32Array(n + 1);
    const ver = new Int32Array(n + 1);
    for (let i = 0; i <= n; i++) {
      next[i] = i + 1;
      prev[i] = i - 1;
    }
    // heap entries: [rank, left, right, version of left, version of right]
    const heap = [];
    const less = (a, b) => a[0] < b[0] || (a[0] === b[0] && a[1] < b[1]);
    const push = (e) => {
      heap.push(e);
      let i = heap.length - 1;
      while (i > 0) {
        const p = (i - 1) >> 1;
        if (!less(heap[i], heap[p])) break;
        [heap[i], heap[p]] = [heap[p], heap[i]];
        i = p;
      }
    };
    const pop = () => {
      const top = heap[0];
      const last = heap.pop();
      if (heap.length) {
        heap[0] = last;
        let i = 0;
        for (;;) {
          const l = 2 * i + 1;
          const r = l + 1;
          let m = i;
          if (l < heap.length && less(heap[l], heap[m])) m = l;
          if (r < heap.length && less(heap[r], heap[m])) m = r;
          if (m === i) break;
          [heap[i], heap[m]] = [heap[m], heap[i]];
          i = m;
        }
      }
      return top;
    };
    const consider = (a) => {
      const b = next[a];
      if (a < 0 || b >= n) return;
      const r = this.rank(piece, a, next[b]);
      if (r !== Infinity) push([r, a, b, ver[a], ver[b]]);
    };
    for (let i = 0; i + 1 < n; i++) consider(i);
    const alive = new Uint8Array(n + 1).fill(1);
    while (heap.length) {
      const [, a, b, va, vb] = pop();
      if (!alive[a] || !alive[b] || next[a] !== b || ver[a] !== va || ver[b] !== vb) continue;
      // merge b into a
      alive[b] = 0;
      next[a] = next[b];
      prev[next[b]] = a;
      ver[a]++;
      consider(a);
      if (prev[a] >= 0) consider(prev[a]); // its old pair with a is stale: a's version moved
    }
    for (let a = 0; a < n; a = next[a]) out.push(this.ranks.get(piece.slice(a, next[a])));
  }
}
