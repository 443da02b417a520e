"""How an encoder's model runs: the arithmetic it computes in (int8 on CPU, fp16 on CUDA) and, on
CPU, its forward as one TorchScript graph.

The graph gives the same bits as the eager model and leaves out what the eager one pays per
layer in Python: a query's forward takes half the time, an indexed unit's a fifth less
(docs/BENCHMARKS.md), and it holds the GIL only to start, so concurrent queries share the cores
instead of queueing for the interpreter between every operator.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

log = logging.getLogger(__name__)

TRACE_TOKENS = 24
"""Length of the example input the graph is traced with (any length runs through it)."""


def reduce_precision(model: Any, device: str) -> tuple[Any, str]:
    """The model in the cheaper arithmetic its device runs well: fp16 on CUDA, int8 dynamic
    quantization of the linear layers on CPU (weights int8, activations quantized per batch)."""
    import torch

    if device.startswith("cuda"):
        return model.half(), "fp16"
    with warnings.catch_warnings():
        # torch.ao's eager quantization still works; its deprecation points at torchao, which
        # would be one more package for the same int8 kernels (fbgemm)
        warnings.simplefilter("ignore")
        return torch.ao.quantization.quantize_dynamic(
            model, {torch.nn.Linear}, dtype=torch.qint8
        ), "int8"


def one_per_forward(precision: str, batch_size: int) -> int:
    """The batch size for a precision: int8 quantizes each forward's activations with one scale,
    so a text batched with others would get a vector that depends on them; one text per forward
    keeps each vector its own, and on CPU costs nothing (no padding; bench/encoder_levers.py)."""
    return 1 if precision == "int8" else batch_size


class Forward:
    """``(ids, mask) -> last hidden state`` of a BERT-style model: through its traced graph on
    CPU (padding masked as the eager model masks it, tests/test_precision.py), else eagerly."""

    def __init__(self, model: Any, device: str) -> None:
        self.model = model
        self.graph = trace(model) if device == "cpu" else None

    def __call__(self, ids: Any, mask: Any) -> Any:
        """Hidden states of a batch (call under ``torch.inference_mode``)."""
        if self.graph is not None:
            return self.graph(ids, mask)
        return self.model(input_ids=ids, attention_mask=mask).last_hidden_state


def trace(model: Any) -> Any | None:
    """The model's forward traced on an example; None (with a warning in the log) where tracing
    fails, so the eager model serves instead."""
    import torch

    class _Hidden(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, ids: Any, mask: Any) -> Any:
            return self.inner(input_ids=ids, attention_mask=mask).last_hidden_state

    ids = torch.full((1, TRACE_TOKENS), 1000, dtype=torch.long)
    try:
        with torch.inference_mode(), warnings.catch_warnings():
            # the tracer warns of Python branches in transformers' mask building; none of them
            # depends on the mask's values (a padded batch gives the eager bits)
            warnings.simplefilter("ignore")
            return torch.jit.trace(_Hidden(model), (ids, torch.ones_like(ids)), check_trace=False)
    except Exception as exc:
        log.warning("encoder runs eagerly: tracing its forward failed: %s", exc)
        return None
