// The page's encoders: one per registered tokenizer, built from the data files that
// `dwstok page` writes (see dwstok_cli/page_data.py).
//   kind "tiktoken": rank-based BPE (dwstok models, GPT-2, o200k) with js-tiktoken;
//   kind "hf": a tokenizer.json (Mistral's SentencePiece model, converted) with tokenizers.js.
import { Tiktoken } from "js-tiktoken/lite";
import { Tokenizer } from "@huggingface/tokenizers";

const SPACE = "\u2581";
const BYTE_PIECE = /^<0x([0-9A-Fa-f]{2})>$/;
const utf8 = new TextEncoder();

function tiktokenEncoder(entry) {
  const enc = new Tiktoken({
    pat_str: entry.pat_str,
    special_tokens: entry.special_tokens,
    bpe_ranks: entry.bpe_ranks,
  });
  const specials = new Map(Object.entries(entry.special_tokens).map(([k, v]) => [v, utf8.encode(k)]));
  return {
    // no special is parsed out of the text: a name such as <bos> stays text, as in dwstok
    encode: (text) => enc.encode(text, [], []),
    bytesOf: (id) => enc.textMap.get(id) ?? specials.get(id) ?? new Uint8Array(0),
    prefixBytes: 0,
  };
}

function hfEncoder(entry) {
  const tok = new Tokenizer(entry.tokenizer, {});
  const pieces = [];
  for (const [piece, id] of Object.entries(entry.tokenizer.model.vocab)) pieces[id] = piece;
  const cache = new Map();
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
    encode: (text) => tok.encode(text, { add_special_tokens: false }).ids,
    bytesOf,
    // SentencePiece's dummy prefix: one space before non-empty text, which is not the user's
    prefixBytes: entry.dummy_prefix ? 1 : 0,
  };
}

export function makeEncoder(entry) {
  if (entry.kind === "tiktoken") return tiktokenEncoder(entry);
  if (entry.kind === "hf") return hfEncoder(entry);
  throw new Error(`unknown tokenizer kind ${entry.kind} for ${entry.name}`);
}
