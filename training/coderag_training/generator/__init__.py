"""Offline fine-tuning of the generator's model: traps, training, evaluation, GGUF export."""
