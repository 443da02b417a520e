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
