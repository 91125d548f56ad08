"""Writes a small random-weight Qwen3 model over the real Qwen3 tokenizer, for running real
engines (vLLM, SGLang) on a CPU without downloading weights.

The weights are random (seeded), so the model writes nonsense: exactly what a constraint must
survive. Its vocabulary, special tokens and chat template are Qwen3's (from the npm tokenizer
package that scripts/fetch-data.sh caches), so the engine's tokenizer, the chat template's
`<tool_call>` format and callmask's dialect detection all see the real thing. head_dim 64: the
CPU attention backend of vLLM supports it (16 is refused).

    python make_tiny_qwen3.py TOKENIZER_DIR OUT_DIR [--layers 2] [--hidden 256] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shutil


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tokenizer_dir", type=pathlib.Path)
    ap.add_argument("out_dir", type=pathlib.Path)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    tok_json = json.loads((args.tokenizer_dir / "tokenizer.json").read_text())
    n_tokens = 1 + max(
        [int(i) for i in tok_json["model"]["vocab"].values()]
        + [t["id"] for t in tok_json.get("added_tokens", [])]
    )
    # Models pad their logits beyond the tokenizer (Qwen3: 151,936 for 151,669 tokens).
    vocab_size = (n_tokens + 127) // 128 * 128
    tok_cfg = json.loads((args.tokenizer_dir / "tokenizer_config.json").read_text())
    eos = tok_json_id(tok_json, "<|im_end|>")
    config = Qwen3Config(
        vocab_size=vocab_size,
        hidden_size=args.hidden,
        intermediate_size=args.hidden * 2,
        num_hidden_layers=args.layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=eos,
        torch_dtype="float32",
    )
    torch.manual_seed(args.seed)
    model = Qwen3ForCausalLM(config).to(torch.float32)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(args.out_dir, safe_serialization=True)
    shutil.copy(args.tokenizer_dir / "tokenizer.json", args.out_dir / "tokenizer.json")
    tok_cfg["model_max_length"] = 4096
    (args.out_dir / "tokenizer_config.json").write_text(json.dumps(tok_cfg, indent=1))
    (args.out_dir / "generation_config.json").write_text(
        json.dumps({"eos_token_id": [eos], "do_sample": True})
    )
    print(f"make_tiny_qwen3: {args.out_dir} (vocab {vocab_size}, tokenizer {n_tokens}, eos {eos})")


def tok_json_id(tok_json: dict, text: str) -> int:
    for t in tok_json.get("added_tokens", []):
        if t["content"] == text:
            return int(t["id"])
    raise SystemExit(f"make_tiny_qwen3: the tokenizer has no {text!r}")


if __name__ == "__main__":
    main()
