// The page's encoders: one per registered tokenizer, built from the data files that
// `dwstok page` writes (see dwstok_cli/page_data.py).
//   kind "tiktoken": rank-based BPE (dwstok models, GPT-2, o200k), rankbpe.js;
//   kind "hf": a tokenizer.json (Mistral's SentencePiece model, converted) with tokenizers.js.
import { RankBPE } from "./rankbpe.js";
import { Tokenizer } from "@huggingface/tokenizers";

const SPACE = "\u2581";
const BYTE_PIECE = /^<0x([0-9A-Fa-f]{2})>$/;
const utf8 = new TextEncoder();

function tiktokenEncoder(entry) {
  const bpe = new RankBPE(entry);
  const specials = new Map(Object.entries(entry.special_tokens).map(([k, v]) => [v, utf8.encode(k)]));
  return {
    // no special is parsed out of the text: a name such as <bos> stays text, as in dwstok
    encode: (text) => bpe.encode(text),
    bytesOf: (id) => bpe.bytesOf(id) ?? specials.get(id) ?? new Uint8Array(0),
    prefixBytes: 0,
  };
}

function hfEncoder(entry) {
  const tok = new Tokenizer(entry.tokenizer, {});
  const pieces = [];
  for (const [piece, id] of Object.entries(entry.tokenizer.model.vocab)) pieces[id] = piece;
  const cache = new Map();
  const words = new Map();
  const bytesOf = (id) => {
    let b = cache.get(id);
    if (b === undefined) {
      const piece = pieces[id] ?? "";
      const m = BYTE_PIECE.exec(piece);
      b = m ? Uint8Array.of(parseInt(m[1], 16)) : utf8.encode(piece.replaceAll(SPACE, " "));
      cache.set(id, b);
    }
    return b;
  };
  return {
    encode: (text) => encodeCached(tok, text, words),
    bytesOf,
    // SentencePiece's dummy prefix: one space before non-empty text, which is not the user's
    prefixBytes: entry.dummy_prefix ? 1 : 0,
  };
}

// tokenizers.js's own pipeline for text without added tokens (Tokenizer.encode_text):
// normalizer, pre-tokenizer, model; with the ids of each word kept, so that re-encoding
// as the user types only runs the model on the words that changed (tokenizers.js takes
// 45-95 ms for 10 KB each time without it). A word's ids do not depend on its neighbours:
// that is what the pre-tokenizer's split means.
function encodeCached(tok, text, words) {
  if (!text) return [];
  const normalized = tok.normalizer ? tok.normalizer(text) : text;
  if (!normalized) return [];
  const parts = tok.pre_tokenizer ? tok.pre_tokenizer(normalized, { section_index: 0 }) : [normalized];
  const out = [];
  for (const w of parts) {
    let ids = words.get(w);
    if (ids === undefined) {
      ids = tok.model([w]).map((t) => tok.model.tokens_to_ids.get(t));
      if (words.size >= 1 << 16) words.clear();
      words.set(w, ids);
    }
    for (const id of ids) out.push(id);
  }
  return out;
}

export function makeEncoder(entry) {
  if (entry.kind === "tiktoken") return tiktokenEncoder(entry);
  if (entry.kind === "hf") return hfEncoder(entry);
  throw new Error(`unknown tokenizer kind ${entry.kind} for ${entry.name}`);
}
