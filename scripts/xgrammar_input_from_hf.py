#!/usr/bin/env python3
"""Makes an input file for scripts/bench_xgrammar.py from a Hugging Face tokenizer.json and the
benchmark schemas, without the Rust side (for debugging the XGrammar peer on its own).

    py=$(scripts/setup-xgrammar.sh --print-python)
    "$py" scripts/xgrammar_input_from_hf.py \\
        --tokenizer "$CALLMASK_CACHE/tokenizers/llama3_1-3.7.2/tokenizer.json" --tag llama \\
        --vocab-out /tmp/llama-vocab.json crates/callmask/benches/schemas/*.schema.json > /tmp/cases.json
    "$py" scripts/bench_xgrammar.py /tmp/cases.json

Vocabulary: every id of model.vocab plus added_tokens; byte-level BPE token strings are mapped
back to raw bytes through the inverse of GPT-2's bytes_to_unicode table (tokens outside that
alphabet are taken as UTF-8, as for non-byte-level models); added tokens keep their UTF-8 text.
Special ids: added tokens marked "special", and ids that no entry names (holes, with no bytes).
EOS ids: special tokens named like callmask's EOG_TOKEN_NAMES (crates/callmask/src/vocab.rs).

Cases: for each X.schema.json, the instance X.instance.json (same folder) is re-serialized with
json.dumps (declared key order kept, ", " and ": " separators, or compact with --compact) and
tokenized with the `tokenizers` package (no special tokens added); the decoded bytes are
checked to equal the text. Without `tokenizers` or without an instance, "tokens" is empty.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

EOG_TOKEN_NAMES = [
    "<|eot_id|>", "<|end_of_text|>", "<|eom_id|>", "<|im_end|>", "<|endoftext|>",
    "<end_of_turn>", "<eos>", "</s>", "<|end|>",
]


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte → printable character table."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) \
        + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def is_byte_level(tok: dict) -> bool:
    def has(node) -> bool:
        if not isinstance(node, dict):
            return False
        if node.get("type") == "ByteLevel":
            return True
        return any(has(d) for d in node.get("decoders", []) + node.get("pretokenizers", []))
    return has(tok.get("decoder")) or has(tok.get("pre_tokenizer"))


def load_vocab(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        tok = json.load(f)
    inverse = {c: b for b, c in bytes_to_unicode().items()}
    byte_level = is_byte_level(tok)

    def decode(s: str) -> bytes:
        if byte_level and all(c in inverse for c in s):
            return bytes(inverse[c] for c in s)
        return s.encode("utf-8")

    entries: dict[int, bytes] = {}
    for s, i in tok["model"]["vocab"].items():
        entries[int(i)] = decode(s)
    special = set()
    names = {}
    for a in tok.get("added_tokens", []):
        i = int(a["id"])
        entries[i] = a["content"].encode("utf-8")
        if a.get("special"):
            special.add(i)
            names[a["content"]] = i
    size = max(entries) + 1
    tokens = []
    for i in range(size):
        if i not in entries:
            special.add(i)  # a hole: no bytes, never text
        tokens.append(entries.get(i, b""))
    eos = sorted(names[n] for n in EOG_TOKEN_NAMES if n in names)
    return {"tokens_hex": [t.hex() for t in tokens], "eos": eos, "special": sorted(special)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("schemas", nargs="+", help="*.schema.json files")
    p.add_argument("--tokenizer", required=True, help="tokenizer.json")
    p.add_argument("--tag", default="hf", help="suffix of case names: NAME/TAG")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--compact", action="store_true", help="serialize instances without spaces")
    p.add_argument("--vocab-out", help="write the vocab object here and refer to it by file")
    args = p.parse_args()

    vocab = load_vocab(args.tokenizer)
    try:
        from tokenizers import Tokenizer
        hf = Tokenizer.from_file(args.tokenizer)
    except ImportError:
        print("xgrammar_input_from_hf: no `tokenizers` package, cases get no tokens",
              file=sys.stderr)
        hf = None

    token_bytes = [bytes.fromhex(h) for h in vocab["tokens_hex"]]
    cases = []
    for path in args.schemas:
        name = os.path.basename(path).removesuffix(".schema.json")
        with open(path, encoding="utf-8") as f:
            schema = json.load(f)
        tokens = []
        inst_path = path.removesuffix(".schema.json") + ".instance.json"
        if hf is not None and os.path.exists(inst_path):
            with open(inst_path, encoding="utf-8") as f:
                instance = json.load(f)
            sep = (",", ":") if args.compact else (", ", ": ")
            text = json.dumps(instance, separators=sep, ensure_ascii=False)
            tokens = hf.encode(text, add_special_tokens=False).ids
            got = b"".join(token_bytes[t] for t in tokens)
            if got != text.encode("utf-8"):
                print(f"xgrammar_input_from_hf: {name}: tokens do not spell the instance",
                      file=sys.stderr)
                return 1
        cases.append({"name": f"{name}/{args.tag}", "schema": schema, "tokens": tokens,
                      "reps": args.reps})

    if args.vocab_out:
        with open(args.vocab_out, "w", encoding="utf-8") as f:
            json.dump(vocab, f)
        vocab_ref = {"file": os.path.abspath(args.vocab_out)}
    else:
        vocab_ref = vocab
    json.dump({"vocab": vocab_ref, "cases": cases}, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
