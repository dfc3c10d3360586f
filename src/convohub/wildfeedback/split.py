"""Step 3 of WildFeedback: the held-out test set -- split by user, typical items by clustering, de-duplicated.

* Users: a user is in the test pool exactly when :func:`convohub.corpus.dataset.split_of` puts them in the
  ``test`` split of ``wildchat-sample``, so the chat LM trained on that corpus never saw a test user and
  no user has pairs in both WildFeedback splits.
* Typical items (the paper: 70 FAISS clusters x 10 items whose preferences are most similar to their
  group): embed ``query + preferences`` with all-MiniLM-L6-v2 (normalised), run ``faiss.Kmeans`` and take,
  per cluster, the ``per_cluster`` items closest to the centroid.
* De-duplication (WildBench-style): drop an item whose query text (normalised) is already in the test set
  or in the training pairs, or whose embedding has cosine >= ``near_duplicate`` with a kept test item.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from convohub.embeddings import embed


def is_test_user(user_id: str) -> bool:
    from convohub.corpus.dataset import split_of

    return split_of(user_id) == "test"


def item_text(row: dict[str, Any]) -> str:
    """What is embedded for clustering: the user's query and the summarised preferences."""
    return row["prompt"][-1]["content"] + "\n" + "\n".join(row["preferences"])


def typical_items(vectors: np.ndarray, n_clusters: int, per_cluster: int, seed: int = 0) -> list[int]:
    """Indices of the ``per_cluster`` most central items of each of ``n_clusters`` k-means clusters
    (fewer clusters when there are fewer items), ordered by cluster then distance."""
    import faiss

    n = len(vectors)
    if n == 0:
        return []
    k = max(1, min(n_clusters, n))
    kmeans = faiss.Kmeans(vectors.shape[1], k, niter=25, seed=seed, verbose=False, min_points_per_centroid=1)
    kmeans.train(vectors)
    distance, assignment = kmeans.index.search(vectors, 1)
    chosen: list[int] = []
    for cluster in range(k):
        members = [i for i in range(n) if assignment[i, 0] == cluster]
        members.sort(key=lambda i: (float(distance[i, 0]), i))
        chosen.extend(members[:per_cluster])
    return chosen


def _norm(text: str) -> str:
    return re.sub(r"\W+", " ", text.lower()).strip()


def deduplicate(candidates: Sequence[int], rows: Sequence[dict[str, Any]], vectors: np.ndarray,
                train_queries: set[str], near_duplicate: float = 0.95) -> tuple[list[int], dict[str, int]]:
    """Kept indices (in candidate order) and how many were dropped for which reason."""
    kept: list[int] = []
    seen: set[str] = set()
    dropped = {"same_query_in_train": 0, "same_query_in_test": 0, "near_duplicate": 0}
    for i in candidates:
        query = _norm(rows[i]["prompt"][-1]["content"])
        if query in train_queries:
            dropped["same_query_in_train"] += 1
        elif query in seen:
            dropped["same_query_in_test"] += 1
        elif kept and float(np.max(vectors[kept] @ vectors[i])) >= near_duplicate:
            dropped["near_duplicate"] += 1
        else:
            kept.append(i)
            seen.add(query)
    return kept, dropped


def select_test(pool: Sequence[dict[str, Any]], train_rows: Sequence[dict[str, Any]], *, n_clusters: int,
                per_cluster: int, seed: int = 0, near_duplicate: float = 0.95) -> tuple[list[dict[str, Any]],
                                                                                          dict[str, int]]:
    """The test rows chosen from ``pool`` (pairs of test users) and the counts of each stage."""
    counts = {"test_pool": len(pool)}
    if not pool:
        return [], {**counts, "typical_selected": 0, "test": 0}
    vectors = embed([item_text(r) for r in pool])
    candidates = typical_items(vectors, n_clusters, per_cluster, seed)
    train_queries = {_norm(r["prompt"][-1]["content"]) for r in train_rows}
    kept, dropped = deduplicate(candidates, pool, vectors, train_queries, near_duplicate)
    counts.update({"typical_selected": len(candidates), **{f"dropped_{k}": v for k, v in dropped.items()},
                   "test": len(kept)})
    return [pool[i] for i in kept], counts
