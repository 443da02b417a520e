"""Offline fine-tuning tooling: reads the services (like a composition root), never run by them."""
