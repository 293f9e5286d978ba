"""Makes the real-verl testbed's tiny model and data, offline (test infrastructure).

    python make_tiny_assets.py OUT_DIR

Run with the verl runtime's Python (transformers, tokenizers, torch, pyarrow). Writes:
- OUT_DIR/model: a randomly initialised Qwen2ForCausalLM (hidden 64, 2 layers, 4 heads,
  2 KV heads; about 127k parameters) and a byte-level BPE tokenizer trained here on a small
  corpus (vocab about 400, ChatML chat template, eos ``<|im_end|>``, pad ``<|endoftext|>``),
  saved with ``save_pretrained`` so that verl loads it as any Hugging Face model folder;
- OUT_DIR/sft/{train,test}.parquet: a ``messages`` column (a user and an assistant turn), as
  verl's multi-turn SFT dataset reads it;
- OUT_DIR/rl/{train,test}.parquet: ``data_source``, ``prompt`` (a chat list), ``ability``,
  ``reward_model`` {style, ground_truth}, ``extra_info``, as verl's RL dataset reads it.

No hub is reached (the machine has none): everything is made from seeded random numbers and
the corpus below, so the same script makes the same files.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def problems(n: int, offset: int) -> list[tuple[str, str]]:
    return [(f"What is {a} + {a % 7}? Answer after ####.", str(a + a % 7)) for a in range(offset, offset + n)]


def make_tokenizer(out: Path) -> PreTrainedTokenizerFast:
    corpus = [f"{q} The answer is #### {a}" for q, a in problems(200, 0)]
    corpus += ["user assistant system", "Let me think step by step."]
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    core.train_from_iterator(corpus, trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                        bos_token=None, unk_token=None)
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(out)
    return tokenizer


def make_model(out: Path, tokenizer: PreTrainedTokenizerFast) -> None:
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                         tie_word_embeddings=True, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.eos_token_id)
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(out)


def write(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)


def main(out: Path) -> None:
    model_dir = out / "model"
    tokenizer = make_tokenizer(model_dir)
    make_model(model_dir, tokenizer)
    for split, n, offset in (("train", 32, 0), ("test", 8, 100)):
        write(out / "sft" / f"{split}.parquet", [
            {"messages": [{"role": "user", "content": q}, {"role": "assistant", "content": f"#### {a}"}]}
            for q, a in problems(n, offset)])
        write(out / "rl" / f"{split}.parquet", [{
            "data_source": "openai/gsm8k",
            "prompt": [{"role": "user", "content": q}],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": a},
            "extra_info": {"index": i, "split": split},
        } for i, (q, a) in enumerate(problems(n, offset))])
    (out / "assets.json").write_text(json.dumps({"vocab": len(tokenizer),
                                                 "parameters": sum(p.numel() for p in
                                                                   Qwen2ForCausalLM.from_pretrained(model_dir).parameters())}))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
