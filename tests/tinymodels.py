"""Tiny models built offline for tests of the code paths that big models take."""

from __future__ import annotations

from pathlib import Path

CORPUS = [
    "def create order user items return save",
    "func process order ctx request error return nil",
    "class user store cache get fetch id",
    "interface user client load base fetch json",
    "the a of to and in is for on with",
]


def build_tiny_roberta(dest: Path) -> Path:
    """A 2-layer, 32-wide RoBERTa with a word-level tokenizer, saved as a HF model directory."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, RobertaConfig, RobertaModel

    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(CORPUS, trainers.WordLevelTrainer(special_tokens=specials))
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        mask_token="<mask>",
        cls_token="<s>",
        sep_token="</s>",
    )
    dest.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(dest)
    config = RobertaConfig(
        vocab_size=tok.get_vocab_size(),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=66,
        pad_token_id=1,
    )
    RobertaModel(config).save_pretrained(dest)
    return dest


CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
"""The ChatML template Qwen2 instruct models use."""


def build_tiny_qwen2(dest: Path) -> Path:
    """A 2-layer, 64-wide Qwen2ForCausalLM (random weights) with a byte-level BPE tokenizer and
    a ChatML chat template, saved as a HF model directory."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator([*CORPUS, "system user assistant FILE: answer 订单 函数"], trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
    )
    fast.chat_template = CHATML
    dest.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(dest)
    config = Qwen2Config(
        vocab_size=tok.get_vocab_size(),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tok.token_to_id("<|im_end|>"),
        pad_token_id=tok.token_to_id("<|endoftext|>"),
    )
    import torch

    torch.manual_seed(0)
    Qwen2ForCausalLM(config).save_pretrained(dest)
    return dest
