"""Fitting the learned ranker (``coderag_retriever.learned``) offline: pointwise by Newton's
method or listwise (ListNet) with a calibrated probability. ``coderag_training.fit.ranker`` runs it;
the retriever only loads what it wrote."""

from __future__ import annotations

import numpy as np

from coderag_retriever.learned import Ranker


def fit(
    x: np.ndarray,
    y: np.ndarray,
    l2: float = 1.0,
    weight: np.ndarray | None = None,
    steps: int = 100,
) -> Ranker:
    """Train by Newton's method on the L2-regularised, optionally row-weighted log loss (small
    data: exact and fast)."""
    sw = np.ones(len(y)) if weight is None else weight
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    z = (x - mean) / scale
    a = np.hstack([z, np.ones((len(z), 1))])
    w = np.zeros(a.shape[1])
    reg = np.full(a.shape[1], l2)
    reg[-1] = 0.0
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(a @ w)))
        grad = a.T @ (sw * (p - y)) + reg * w
        hess = (a * (sw * p * (1 - p))[:, None]).T @ a + np.diag(reg + 1e-9)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-7:
            break
    return Ranker(mean, scale, w[:-1], float(w[-1]))


def fit_listwise(
    groups: list[tuple[np.ndarray, np.ndarray]], l2: float = 1.0, weight: list[float] | None = None
) -> Ranker:
    """Train on whole candidate lists: softmax cross-entropy of each question's candidates
    against its gold units (ListNet), then calibrate the score to a probability."""
    from scipy.optimize import minimize

    weight = [1.0] * len(groups) if weight is None else weight
    kept = [(x, y, g) for (x, y), g in zip(groups, weight, strict=True) if y.sum() > 0]
    groups = [(x, y) for x, y, _ in kept]
    allx = np.vstack([x for x, _ in groups])
    mean, scale = allx.mean(axis=0), allx.std(axis=0)
    scale[scale < 1e-9] = 1.0
    zs = [((x - mean) / scale, y / y.sum()) for x, y in groups]
    qw = [g for _, _, g in kept]

    def loss(w: np.ndarray) -> tuple[float, np.ndarray]:
        total, grad = 0.5 * l2 * w @ w, l2 * w
        for (z, t), g in zip(zs, qw, strict=True):
            s = z @ w
            s = s - s.max()
            p = np.exp(s) / np.exp(s).sum()
            total -= g * float(t @ np.log(p + 1e-12))
            grad = grad + g * (z.T @ (p - t))
        return total, grad

    w = minimize(loss, np.zeros(allx.shape[1]), jac=True, method="L-BFGS-B").x
    ranker = Ranker(mean, scale, w, 0.0)
    s = np.concatenate([ranker.score(x) for x, _ in groups])
    y = np.concatenate([(y > 0).astype(float) for _, y in groups])
    cal = fit(s[:, None], y, l2=1e-3)
    a = cal.weights[0] / cal.scale[0]
    return Ranker(mean, scale, w, 0.0, (float(a), float(cal.bias - a * cal.mean[0])))
