"""WildChat-AQA retrieval: chunking with the real MiniLM tokenizer, pre-filtered dense and BM25 search,
PROBE pooling, index persistence, and the authors' NDCG rule for malformed rankings (hand-computed)."""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from convohub.aqa import (
    Document,
    Filters,
    Hit,
    RetrievalIndex,
    chunk_text,
    conversation_documents,
    parse_ranking,
    pool_hits,
)
from convohub.aqa.chunking import minilm_tokenizer
from convohub.metrics import ndcg_at_k, ranking_scores

T0 = datetime(2023, 6, 1, tzinfo=timezone.utc)
COUNTRIES = ["United States", "China", "Russia", "France"]


def _n_tokens(text: str) -> int:
    return len(minilm_tokenizer()(text, add_special_tokens=False)["input_ids"])


# --- chunking ---------------------------------------------------------------------------------------------

def test_chunks_pack_whole_sentences_within_the_window_and_overlap():
    text = " ".join(f"Sentence {i} is about the topic {i % 7} in detail." for i in range(120))
    chunks = chunk_text(text, max_tokens=64, overlap=16)
    assert len(chunks) > 5
    sentences_of = [re.findall(r"Sentence (\d+) is about the topic \d+ in detail\.", c.text) for c in chunks]
    for chunk, numbers in zip(chunks, sentences_of, strict=True):
        assert chunk.n_tokens <= 64 and chunk.n_tokens == _n_tokens(chunk.text)
        # nothing but whole sentences: the sentences found rebuild the chunk exactly
        assert chunk.text == " ".join(f"Sentence {i} is about the topic {int(i) % 7} in detail." for i in numbers)
    for prev, nxt in zip(sentences_of, sentences_of[1:], strict=False):
        shared = [s for s in nxt if s in prev]
        assert shared and shared == nxt[: len(shared)] == prev[-len(shared):]  # overlap is a prefix/suffix
        overlap_tokens = _n_tokens(" ".join(f"Sentence {i} is about the topic {int(i) % 7} in detail." for i in shared))
        assert overlap_tokens <= 16
    covered = [int(i) for numbers in sentences_of for i in numbers]
    assert sorted(set(covered)) == list(range(120))


def test_default_window_is_512_with_128_overlap():
    text = "\n".join(f"Line {i}: the user asks how to cook pasta number {i} with tomatoes and basil." for i in range(300))
    chunks = chunk_text(text)
    assert len(chunks) >= 3
    assert all(c.n_tokens <= 512 for c in chunks)
    assert max(c.n_tokens for c in chunks) > 512 - 30  # packed close to the window, not one line per chunk


def test_a_sentence_longer_than_the_window_is_cut_by_tokens():
    long = " ".join(f"token{i}" for i in range(150))  # one sentence, no punctuation
    chunks = chunk_text(f"Short start. {long}. End here.", max_tokens=64, overlap=16)
    assert chunks[0].text == "Short start." and chunks[-1].text == "End here."
    pieces = chunks[1:-1]
    assert len(pieces) >= 3 and all(p.n_tokens <= 64 and p.text in f"{long}." for p in pieces)
    assert all(p.n_tokens == 64 for p in pieces[:-1])
    for a, b in zip(pieces, pieces[1:], strict=False):
        # consecutive windows overlap (16 tokens, a few words) and then move on
        start_of_a, start_of_b = f"{long}.".index(a.text), f"{long}.".index(b.text)
        assert start_of_a < start_of_b < start_of_a + len(a.text)
        shared = a.text[start_of_b - start_of_a:]
        assert b.text.startswith(shared) and 3 <= len(shared.split()) <= 16
    assert "token0" in pieces[0].text and pieces[-1].text.endswith("token149.")


def test_chunking_rejects_a_bad_window():
    with pytest.raises(ValueError, match="overlap"):
        chunk_text("Hello.", max_tokens=10, overlap=10)


def test_conversation_documents_chunk_raw_and_keep_summaries_whole():
    record = {"hash": "c1", "timestamp": T0, "country": "France", "user_name": "u1", "summary": "Pasta help.",
              "conversation": [{"role": "user", "content": "How do I cook pasta? " * 80},
                               {"role": "assistant", "content": "Boil water. Add salt."}]}
    raw = conversation_documents([record], "raw", max_tokens=64, overlap=16)
    assert len(raw) > 1 and [d.doc_id for d in raw[:2]] == ["c1#0", "c1#1"]
    assert {d.conversation_hash for d in raw} == {"c1"}
    assert conversation_documents([record], "summary") == [Document("c1", "c1", "Pasta help.", T0, "France", "u1")]
    with pytest.raises(ValueError, match="conversation record 0: missing field"):
        conversation_documents([{"hash": "c2", "timestamp": T0}], "raw")


# --- filtered search --------------------------------------------------------------------------------------

def _synthetic(n: int = 400, seed: int = 0) -> tuple[list[Document], np.ndarray]:
    rng = np.random.default_rng(seed)
    docs = [Document(f"d{i}", f"c{i // 2}", f"document {i} about {'pasta' if i % 3 == 0 else 'rockets'}",
                     T0 + timedelta(hours=int(rng.integers(0, 24 * 60))), COUNTRIES[int(rng.integers(0, 4))],
                     f"user{int(rng.integers(0, 10))}") for i in range(n)]
    vectors = rng.standard_normal((n, 16)).astype(np.float32)
    return docs, vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _passes(doc: Document, f: Filters) -> bool:
    return ((f.start is None or doc.timestamp >= f.start) and (f.end is None or doc.timestamp <= f.end)
            and (f.countries is None or doc.country in f.countries)
            and (f.user_names is None or doc.user_name in f.user_names))


@pytest.fixture(scope="module")
def synthetic_index() -> tuple[RetrievalIndex, list[Document], np.ndarray]:
    docs, vectors = _synthetic()
    return RetrievalIndex.build(docs, embeddings=vectors), docs, vectors


FILTERS = [
    Filters(T0 + timedelta(days=10), T0 + timedelta(days=20), countries=frozenset({"China", "France"})),
    Filters(countries=frozenset({"Russia"}), user_names=frozenset({"user1", "user2", "user3"})),
    Filters(start=T0 + timedelta(days=50)),
]


@pytest.mark.parametrize("backend", ["blas", "faiss"])
@pytest.mark.parametrize("f", FILTERS)
def test_dense_search_honours_filters(synthetic_index, f, backend):
    index, docs, vectors = synthetic_index
    by_id = {d.doc_id: d for d in docs}
    passing = {d.doc_id for d in docs if _passes(d, f)}
    assert 5 < len(passing) < len(docs)
    hits = index.dense_search(vectors[:3], k=50, filters=f, backend=backend)
    for query, run in enumerate(hits):
        assert len(run) == min(50, len(passing))
        assert {h.doc_id for h in run} <= passing
        scores = [h.score for h in run]
        assert scores == sorted(scores, reverse=True)
        # exact: the best passing document by cosine comes first
        best = max(passing, key=lambda i: float(vectors[int(i[1:])] @ vectors[query]))
        assert run[0].doc_id == best and by_id[best].conversation_hash == run[0].conversation_hash


def test_time_bounds_are_inclusive(synthetic_index):
    index, docs, vectors = synthetic_index
    doc = docs[7]
    hits = index.dense_search(vectors[0], k=10, filters=Filters(doc.timestamp, doc.timestamp))[0]
    assert doc.doc_id in {h.doc_id for h in hits}
    assert all(d.timestamp == doc.timestamp for d in docs if d.doc_id in {h.doc_id for h in hits})


def test_prefilter_returns_k_hits_where_a_postfilter_would_return_none():
    docs, vectors = _synthetic(1000, seed=3)
    query = vectors[0]
    # the rare country holds the 20 documents *least* similar to the query
    far = set(np.argsort(vectors @ query)[:20].tolist())
    docs = [Document(d.doc_id, d.conversation_hash, d.text, d.timestamp, "Iceland" if i in far else d.country,
                     d.user_name) for i, d in enumerate(docs)]
    index = RetrievalIndex.build(docs, embeddings=vectors, with_bm25=False)
    unfiltered = index.dense_search(query, k=100)[0]
    assert not {h.doc_id for h in unfiltered} & {f"d{i}" for i in far}  # post-filtering these finds nothing
    hits = index.dense_search(query, k=10, filters=Filters(countries=frozenset({"Iceland"})))[0]
    assert len(hits) == 10 and {h.doc_id for h in hits} <= {f"d{i}" for i in far}
    assert index.dense_search(query, k=10, filters=Filters(countries=frozenset({"Atlantis"})))[0] == []


@pytest.mark.parametrize("f", FILTERS)
def test_bm25_search_honours_filters(synthetic_index, f):
    index, docs, _ = synthetic_index
    passing = {d.doc_id for d in docs if _passes(d, f)}
    pasta = {d.doc_id for d in docs if "pasta" in d.text} & passing
    run = index.bm25_search(["pasta"], k=500, filters=f)[0]
    assert {h.doc_id for h in run} == pasta and pasta  # every matching passing document, nothing else
    assert index.bm25_search(["zeppelin"], k=5, filters=f)[0] == []


def test_probe_filters_from_request():
    f = Filters.from_probe({"start_time": "05-01-2023", "end_time": "05-07-2023", "country": ["France"],
                            "user_name": []})
    assert f.start == datetime(2023, 5, 1, tzinfo=timezone.utc)
    assert f.end == datetime(2023, 5, 7, 23, 59, 59, tzinfo=timezone.utc)  # the end day is included
    assert f.countries == frozenset({"France"}) and f.user_names is None
    default = Filters.from_probe({"start_time": "", "queries": ["x"]})
    assert default.start == datetime(2023, 4, 8, tzinfo=timezone.utc) and default.countries is None
    with pytest.raises(ValueError, match="'end_time'"):
        Filters.from_probe({"end_time": "2023-05-07"})


# --- PROBE pooling ----------------------------------------------------------------------------------------

def test_max_and_sum_pooling_rank_differently():
    runs = [[Hit("a#0", "a", 0.9), Hit("b#0", "b", 0.6)], [Hit("b#1", "b", 0.5), Hit("c#0", "c", 0.4)]]
    by_max = pool_hits(runs, k=3, pooling="max")
    assert [(h.conversation_hash, h.score) for h in by_max] == [("a", 0.9), ("b", 0.6), ("c", 0.4)]
    by_sum = pool_hits(runs, k=3, pooling="sum")
    assert [h.conversation_hash for h in by_sum] == ["b", "a", "c"] and by_sum[0].score == pytest.approx(1.1)
    assert by_sum[0].doc_id == "b#0"  # represented by its best chunk
    assert len(pool_hits(runs, k=2)) == 2


def test_probe_search_size_rule_and_chunk_merge(synthetic_index):
    index, docs, vectors = synthetic_index
    # 5 identical queries, k=4: each query keeps floor(4/5)*2 = 0 -> at least 1 hit, so one conversation
    assert len(index.probe_search(np.repeat(vectors[:1], 5, axis=0), k=4)) == 1
    # 2 identical queries, k=6: each keeps min(6, 3*2) = 6 documents; chunks of one conversation merge
    hits = index.probe_search(np.repeat(vectors[:1], 2, axis=0), k=6)
    top_docs = index.dense_search(vectors[0], k=6)[0]
    assert [h.conversation_hash for h in hits] == list(dict.fromkeys(h.conversation_hash for h in top_docs))
    assert [h.doc_id for h in hits] == [h.doc_id for h in top_docs if h.doc_id in {x.doc_id for x in hits}]
    with pytest.raises(ValueError, match="at least one query"):
        index.probe_search(np.zeros((0, 16), np.float32), k=5)
    with pytest.raises(ValueError, match="not one string"):
        index.probe_search("pasta", k=5, method="bm25")


def test_probe_with_minilm_finds_the_topic_within_the_filter():
    topics = {"cooking": "How long should I boil spaghetti and what sauce goes with it?",
              "space": "Explain how rockets reach orbit and what fuel they burn.",
              "finance": "Should I invest my savings in index funds or bonds?"}
    docs = [Document(f"{name}-{c}", f"{name}-{c}", text, T0 + timedelta(days=i), country, "u")
            for i, (name, text) in enumerate(topics.items()) for c, country in enumerate(COUNTRIES)]
    index = RetrievalIndex.build(docs)
    f = Filters(countries=frozenset({"China"}))
    hits = index.probe_search(["pasta recipes", "cooking noodles"], k=2, filters=f)
    assert hits[0].doc_id == "cooking-1" and all(h.doc_id.endswith("-1") for h in hits)
    bm25 = index.probe_search(["spaghetti sauce"], k=3, filters=f, method="bm25", pooling="sum")
    assert [h.doc_id for h in bm25] == ["cooking-1"]


# --- persistence ------------------------------------------------------------------------------------------

def test_save_load_round_trip(tmp_path, synthetic_index):
    index, docs, vectors = synthetic_index
    folder = tmp_path / "index"
    index.save(folder)
    index.save(folder)  # saving over an existing index replaces it
    loaded = RetrievalIndex.load(folder)
    assert len(loaded) == len(index) and sorted(p.name for p in tmp_path.iterdir()) == ["index"]
    f = FILTERS[0]
    assert loaded.dense_search(vectors[:2], 20, f) == index.dense_search(vectors[:2], 20, f)
    assert loaded.bm25_search(["pasta"], 20, f) == index.bm25_search(["pasta"], 20, f)
    assert loaded.filter_rows(FILTERS[1]).tolist() == index.filter_rows(FILTERS[1]).tolist()
    with pytest.raises(FileNotFoundError, match="index.json"):
        RetrievalIndex.load(tmp_path / "missing")


# --- NDCG on malformed rankings (the authors' rule) -------------------------------------------------------

W = [3.0, 2.0, 1.0, 0.0]
D = [1 / math.log2(i + 2) for i in range(12)]  # discount of 1-based position i + 1


def test_ndcg_repeated_index_keeps_its_last_score():
    # [0, 1, 0]: option 0 gets 9 then 7, option 1 gets 8 -> order 1, 0, then {2, 3} tied
    assert ranking_scores([0, 1, 0], 4).tolist() == [7.0, 8.0, 0.0, 0.0]
    expected = (W[1] * D[0] + W[0] * D[1]) / (W[0] * D[0] + W[1] * D[1])
    assert ndcg_at_k([[0, 1, 0]], [W], k=2)["ndcg@2"] == pytest.approx(expected)


def test_ndcg_out_of_range_index_is_skipped_without_using_a_score():
    assert ranking_scores([9, 2, 0], 4).tolist() == [8.0, 0.0, 9.0, 0.0]
    assert ndcg_at_k([[9, 2, 0]], [W], k=1)["ndcg@1"] == pytest.approx(1 / 3)
    # tie group {1, 3} has mean weight 1 on positions 3 and 4
    expected = (1 * D[0] + 3 * D[1] + 1 * D[2] + 1 * D[3]) / sum(w * d for w, d in zip(W, D, strict=False))
    assert ndcg_at_k([[9, 2, 0]], [W], k=4)["ndcg@4"] == pytest.approx(expected)


def test_ndcg_keeps_only_the_first_ten_entries():
    weights = [0.0] * 11 + [1.0]  # 12 options, only the last is relevant
    ranking = list(range(12))  # 12 entries: entries 11 and 12 are dropped, option 9 gets score 0
    # options 9, 10, 11 tie at score 0 on positions 10-12, each carrying a third of the weight
    expected = (D[9] + D[10] + D[11]) / 3
    assert ndcg_at_k([ranking], [weights], k=12)["ndcg@12"] == pytest.approx(expected)


def test_ndcg_tenth_valid_entry_ties_with_unlisted_options():
    weights = [1.0] + [0.0] * 9
    ranking = list(range(9)) + [0]  # option 0 repeated as the tenth entry: score 0, tied with option 9
    assert ranking_scores(ranking, 10)[0] == 0.0
    assert ndcg_at_k([ranking], [weights], k=10)["ndcg@10"] == pytest.approx(0.5 * D[8] + 0.5 * D[9])


def test_ndcg_unparseable_answer_scores_every_option_zero():
    assert ranking_scores([], 4).tolist() == [0.0] * 4
    assert ndcg_at_k([[]], [W], k=1)["ndcg@1"] == pytest.approx(1.5 / 3)  # mean weight, not 0


def test_ndcg_negative_indices_wrap_like_python_and_fail_below_minus_n():
    assert ranking_scores([-1], 4).tolist() == [0.0, 0.0, 0.0, 9.0]
    assert ndcg_at_k([[-1]], [W], k=1)["ndcg@1"] == 0.0
    with pytest.raises(ValueError, match="question 1: ranking index -5"):
        ndcg_at_k([[0], [-5]], [W, W], k=1)


def test_ndcg_malformed_cases_match_sklearn_on_the_authors_scores():
    from sklearn.metrics import ndcg_score

    cases = [[0, 1, 0], [9, 2, 0], [3, 3, 3, 3], [2, 7, -2, 1, 1], list(range(4)) * 4, []]
    for ranking in cases:
        y_score = ranking_scores(ranking, 4)
        for k in (1, 3):
            assert ndcg_at_k([ranking], [W], k=k)[f"ndcg@{k}"] == pytest.approx(ndcg_score([W], [y_score], k=k))


@pytest.mark.parametrize(("answer", "expected"), [
    ('{"explanation": "x", "answer": [2, 0, 1]}', [2, 0, 1]),
    ('```json\n{"answer": ["3", 1]}\n```', [3, 1]),
    ('<think>{"answer": [9]}</think> Final: {"answer": [4, 5]}', [4, 5]),
    ('{"answer": [3, 1, 2], "explanation": "cut off', [3, 1, 2]),  # broken JSON: the bare list is read
    ('{"answer": ' + str(list(range(12))) + "}", list(range(10))),  # more than ten: first ten kept
    ("I think option 3 is the best.", []),
    ('{"answer": ["third", "first"]}', []),
    (None, []),
])
def test_parse_ranking_reads_answers_like_the_authors(answer, expected):
    assert parse_ranking(answer) == expected


def test_unparseable_answer_scores_as_all_options_tied():
    assert ndcg_at_k([parse_ranking("no idea")], [W], k=1)["ndcg@1"] == pytest.approx(1.5 / 3)


# --- the content-keyed index cache of built folders -------------------------------------------------------

def test_built_folder_index_is_cached_by_content(tmp_path, monkeypatch, caplog):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from _aqa_fixture import build_fixture

    from convohub.aqa import context

    monkeypatch.setenv("CONVOHUB_CACHE", str(tmp_path / "cache"))
    first = build_fixture(tmp_path / "a")
    built = context.build_index(first, "raw")
    key = context.index_key(first, "raw")
    assert (context.index_cache_dir() / key / "index.json").is_file()

    def no_building(*args, **kwargs):
        raise AssertionError("the cached index should have been loaded")

    with monkeypatch.context() as m:
        m.setattr(RetrievalIndex, "build", no_building)
        again = context.build_index(first, "raw")
    assert again.doc_ids.tolist() == built.doc_ids.tolist()
    np.testing.assert_array_equal(again.embeddings, built.embeddings)

    # the same bytes elsewhere share the index; other rows, the other context or BM25 get their own
    assert context.index_key(build_fixture(tmp_path / "copy"), "raw") == key
    other = build_fixture(tmp_path / "b", seed=1)
    assert context.index_key(other, "raw") != key
    assert len({key, context.index_key(first, "summary"), context.index_key(first, "raw", with_bm25=True)}) == 3
    assert context.build_index(other, "raw").doc_ids.tolist() != built.doc_ids.tolist()

    # an unreadable cached index is built again, with a warning naming it
    (context.index_cache_dir() / key / "embeddings.npy").write_bytes(b"not numpy")
    with caplog.at_level("WARNING", logger="convohub.aqa.context"):
        rebuilt = context.build_index(first, "raw")
    assert rebuilt.doc_ids.tolist() == built.doc_ids.tolist()
    assert key in caplog.text and "building it again" in caplog.text
    assert RetrievalIndex.load(context.index_cache_dir() / key).doc_ids.tolist() == built.doc_ids.tolist()

    fresh = context.build_index(first, "raw", cache=False)
    np.testing.assert_allclose(fresh.embeddings, built.embeddings, atol=1e-5)


def test_index_cache_keeps_the_most_recently_used(tmp_path, monkeypatch):
    import os

    from convohub.aqa import context

    monkeypatch.setenv("CONVOHUB_CACHE", str(tmp_path / "cache"))
    root = context.index_cache_dir()
    for age, name in enumerate(["new", "mid", "old", "oldest"]):
        (root / name).mkdir(parents=True)
        (root / name / "index.json").write_text("{}")
        os.utime(root / name / "index.json", (1e9 - age * 100, 1e9 - age * 100))
    (root / ".in-progress.tmp-1").mkdir()  # another process's unfinished write is never touched
    context._mark_used(root / "oldest")  # loading an index counts as a use
    assert sorted(p.name for p in context.prune_index_cache(keep=2, keep_current=root / "mid")) == ["old"]
    assert sorted(p.name for p in root.iterdir()) == [".in-progress.tmp-1", "mid", "new", "oldest"]
    monkeypatch.setenv("CONVOHUB_AQA_INDEX_KEEP", "1")
    assert [p.name for p in context.prune_index_cache()] == ["new", "mid"]
    monkeypatch.setenv("CONVOHUB_AQA_INDEX_KEEP", "none")
    with pytest.raises(ValueError, match="CONVOHUB_AQA_INDEX_KEEP"):
        context.prune_index_cache()
