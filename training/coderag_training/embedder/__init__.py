"""Offline fine-tuning of the embedder's encoder (E5): pairs, training, evaluation."""
