"""HDBSCAN over a repository's unit vectors (R2), kept while its silhouette score holds.

After each refresh, new units join the cluster of their nearest centroid and the silhouette is
measured; below ``silhouette_floor`` (0.3 in seed 004) the whole repository is clustered again.
"""

from __future__ import annotations

import logging

import numpy as np

from coderag.settings import Settings
from coderag.store import Catalog
from coderag_retriever.index import cluster_labels, load_vectors

log = logging.getLogger(__name__)

PCA_DIMS = 32
"""Vectors are projected to this many dimensions before clustering (HDBSCAN slows in high d)."""

SAMPLE = 4000
"""Most points used to measure the silhouette."""


def _project(vectors: np.ndarray) -> np.ndarray:
    centred = vectors - vectors.mean(axis=0)
    dims = min(PCA_DIMS, min(centred.shape) - 1)
    if dims < 2:
        return centred
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    return centred @ vt[:dims].T


def silhouette(vectors: np.ndarray, labels: np.ndarray) -> float | None:
    """Cosine silhouette of the clustered (non-noise) points, or None with under two clusters."""
    from sklearn.metrics import silhouette_score

    mask = labels >= 0
    if len(set(labels[mask].tolist())) < 2:
        return None
    rng = np.random.default_rng(0)
    idx = np.flatnonzero(mask)
    if len(idx) > SAMPLE:
        idx = rng.choice(idx, SAMPLE, replace=False)
    return float(silhouette_score(vectors[idx], labels[idx], metric="cosine"))


def assign_new(vectors: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Give unlabelled points (-2) the label of their nearest centroid."""
    out = labels.copy()
    names = [c for c in np.unique(labels) if c >= 0]
    if not names:
        return out
    centroids = np.stack([vectors[labels == c].mean(axis=0) for c in names])
    todo = np.flatnonzero(out == -2)
    if len(todo):
        out[todo] = np.array(names)[np.argmax(vectors[todo] @ centroids.T, axis=1)]
    return out


def recluster(vectors: np.ndarray, min_size: int) -> np.ndarray:
    """HDBSCAN labels of the vectors (-1 for noise)."""
    import hdbscan

    if len(vectors) < 2 * min_size:
        return np.full(len(vectors), -1, dtype=np.int64)
    points = _project(vectors)
    model = hdbscan.HDBSCAN(min_cluster_size=min_size, min_samples=1, core_dist_n_jobs=1)
    return model.fit_predict(points).astype(np.int64)


def refresh(catalog: Catalog, repo: str, settings: Settings) -> float | None:
    """Bring the repository's clusters up to date; returns the silhouette score."""
    units = catalog.units(repo)
    if not units:
        return None
    ids = [u.id for u in units]
    vectors = load_vectors(units)
    if not vectors.shape[1]:
        return None  # nothing embedded yet: the clusters of the next refresh
    known = catalog.clusters.clustered(repo)
    labels = cluster_labels(catalog, repo, ids)
    labels[[i for i, uid in enumerate(ids) if uid not in known]] = -2
    labels = assign_new(vectors, labels)
    score = silhouette(vectors, labels) if (labels >= 0).any() else None
    if score is None or score < settings.silhouette_floor:
        labels = recluster(vectors, settings.cluster_min_size)
        score = silhouette(vectors, labels)
        log.info("re-clustered %s: %d clusters, silhouette %s", repo, labels.max() + 1, score)

    pairs = [(uid, int(lab)) for uid, lab in zip(ids, labels, strict=True)]
    catalog.clusters.replace(repo, pairs, score)
    return score
