"""The trainers' commands, one module per fitted model, each run from the repository's root as
``python -m coderag_training.fit.<model>`` and each writing a card beside what it fits
(``coderag_training.cards``); ``make models`` runs the ones whose models ship.

- ``unsafe``: the unsafe-request rule (``coderag_retriever/unsafe.json``).
- ``refusal``: the refusal rule (``coderag_retriever/refusal.json``, ``--lexical``:
  ``refusal_lexical.json``), on hits ``bench/answers.py`` saved.
- ``ranker``: the learned ranker (``coderag_retriever/ranker.json``), on the candidate
  rows ``bench/retrieval.py`` and ``bench/written_retrieval.py`` dump.
- ``reranker``: the code cross-encoder (``coderag_embedder/reranker/``), on the candidate lists
  of ``bench/rerank_data.py``; ``listwise``: the same model through sentence-transformers'
  trainer.
- ``encoder``: LoRA adapters of the vector routes' encoders, on the same lists.

The fitting cores they call sit one level up (``coderag_training.ranker``, ``.reranker``,
``.encoder``, ``.embedder``, ``.generator``); the data they read is pinned in ``bench/``
(``coderag_training.pins``), and what runs the search over the benchmark's code bases to make
their rows stays in ``bench/``, which measures.
"""
