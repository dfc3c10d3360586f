"""The knobs of WildChat-AQA's construction, with the paper's values and the tiny profile's, side by side.

The paper builds 182,330 conversations and 6,027 questions with GPT-4o / o3-mini / GPT-4.1 on WildChat-Full;
the tiny profile runs the same code on a few hundred conversations of convohub's sample corpus with the
offline SmolLM2-135M, inside the release's time budget. Every value that differs between the two is a field
of :class:`Settings` and is printed on the dataset card (:func:`describe`), so nothing is scaled silently.

Why the tiny values are what they are:

* support thresholds: the paper keeps a condition configuration when >= 50 conversations match (>= 10 with a
  user condition) out of 182K; the tiny corpus has ~1/1,000 of that, and its users have 10-16 sessions, so
  the tiny profile asks for >= 6 (>= 3 with a user condition);
* taxonomy: k-means with K = B = 500 and up to 10 update rounds are sized for 220K summaries and a fast LLM;
  the tiny profile clusters into 8 and names the clusters with the ``cluster-terms`` stand-in instead of asking
  SmolLM2-135M, which wrote no usable taxonomy in any request (``taxonomy_writer``); subtopic K is searched in
  {2, 3, 4} instead of {10, 15, ..., 40}, the top 2 by silhouette are scored;
* labelling: choosing labels from a closed list (topics, subtopics, their verification, keyword categories)
  is done in the tiny profile by cosine similarity of all-MiniLM-L6-v2 embeddings (``minilm``, named in every
  row's ``labeller``), because SmolLM2 at ~50 tokens/s on two cores cannot label every conversation four
  more times within the budget; the paper profile uses the LLM for them as the paper does;
* SmolLM2 reads the user's messages cut to 48 words (the paper's GPT-4o reads the whole dialogue), answers
  one field per call, and is re-asked once when its answer does not validate; it reads the summary for the
  intent, and writes keywords as ``type=value`` pairs after worked examples given as earlier chat turns
  (it wrote no valid JSON keyword list for any of 24 sample conversations), kept only when the text
  mentions them; such keywords have no description.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

Labeller = Literal["llm", "minilm"]
#: Who writes the topic and subtopic taxonomies: the LLM (TnT-LLM's rounds), or the named stand-in that names the
#: k-means clusters by their distinctive words (:func:`convohub.aqa.taxonomy.cluster_terms`) without asking it.
TaxonomyWriter = Literal["llm", "cluster-terms"]
#: The stand-in value of :data:`TaxonomyWriter`
CLUSTER_TERMS: TaxonomyWriter = "cluster-terms"

#: The keyword types of the extraction prompt (paper Figure 14), the closed list keywords are validated against.
KEYWORD_TYPES: tuple[str, ...] = (
    "person", "technology", "scientific_term", "food", "demographic_term", "organization", "location", "event",
    "artwork", "programming_language", "product_brands", "financial_term",
)
#: The keyword categories of E.5 (the ones questions are asked about).
KEYWORD_CATEGORIES: tuple[str, ...] = (
    "Programming Language", "Video Games", "Tabletop Games", "Manga/Anime", "Film", "TV Show",
    "Western Cartoon/Comic", "Book", "Musical", "Public Figure",
)
#: z-score of the one-sided 90% confidence level used by the quality-control threshold (Eq. 4).
Z_090 = 1.2816


@dataclass(frozen=True)
class Settings:
    """Everything that changes the constructed dataset (part of every stage's fingerprint)."""

    profile: str = "paper"
    # ---- corpus (E.1)
    #: sample-corpus draw (tiny profile and tests; the paper profile reads WildChat-1M or ``--source``)
    sample_users: int = 12
    sample_sessions: tuple[int, int] = (9, 12)
    sample_weeks: int = 12
    #: MinHash on word 4-grams (as the paper); LSH with 14 bands of 8 rows (112 permutations, S-curve
    #: threshold (1/14)^(1/8) = 0.72). The paper's "9 permutations, band 7, rows 3" is inconsistent (7 x 3 =
    #: 21 hashes); 7 x 3 would put the threshold at (1/7)^(1/3) = 0.52 and on the sample corpus flags 51 of 190
    #: templated but distinct conversations (14 x 8: the 6 re-submissions and near-copies).
    minhash_ngrams: int = 4
    minhash_bands: int = 14
    minhash_rows: int = 8
    max_tokens: int = 4096
    #: tokenizer of the length filter: ``smollm2`` (offline, the GPT-2-style BPE of SmolLM2) or a tokenizer
    #: name/path the ``tokenizers`` library loads (the paper: LLaMA-3's)
    tokenizer: str = "meta-llama/Meta-Llama-3-8B"
    min_sessions: int = 10
    #: datatrove executor: ``local`` (default), ``slurm`` or ``ray`` for corpora that outgrow one machine
    executor: Literal["local", "slurm", "ray"] = "local"
    tasks: int = 1
    workers: int = 1
    # ---- LLM annotation (E.2)
    #: words of the user's messages an annotation prompt shows; None = the whole dialogue, both roles
    content_words: int | None = None
    summary_words: int = 30
    intent_words: int = 30
    #: what the intent prompt reads: the ``content`` (as the paper) or the conversation's ``summary`` (shorter)
    intent_source: Literal["content", "summary"] = "content"
    #: keyword answer format: the paper's ``json`` objects with descriptions, or ``pairs`` (``type=value; ...``,
    #: asked with worked examples as earlier chat turns: SmolLM2 wrote no valid JSON list for 24 of 24
    #: sample conversations, measured)
    keyword_format: Literal["json", "pairs"] = "json"
    #: keep a keyword only when the text shown mentions it (a check against a weak model's inventions)
    keywords_grounded: bool = False
    max_attempts: int = 3
    # ---- topics and subtopics (E.3, E.4)
    topic_clusters: int = 500
    topic_batch: int = 500
    topic_rounds: int = 10
    #: LLM calls per taxonomy request at most (a topic round, a topic's subtopic taxonomy); the tiny profile
    #: asks once: SmolLM2-135M wrote no usable taxonomy in 16 of 16 calls (3 topic rounds x 2 tries and 16
    #: subtopic requests x 2 tries, none parsed, measured on the tiny build), so a second try only spent ~120 s
    taxonomy_attempts: int = 3
    #: The tiny profile names the stand-in instead of asking SmolLM2-135M for taxonomies it cannot write: none
    #: usable in 16 of 16 JSON requests (above), nor in 8 of 8 requests for one class per line (2026-12-01, two
    #: wordings on the tiny build's summaries: sentences, the summaries repeated, or "Business and Economics"
    #: three times in one list); asking cost the build 23 s (topics) and about 70 s (subtopics) for nothing.
    taxonomy_writer: TaxonomyWriter = "llm"
    topic_patience: int = 3
    initial_classes: int = 30
    max_classes: int = 60
    max_labels: int = 3
    subtopic_ks: tuple[int, ...] = (10, 15, 20, 25, 30, 35, 40)
    subtopic_top_ks: int = 3
    subtopic_batch: int = 500
    quality_fraction: float = 0.10
    quality_min: int = 20
    quality_max: int = 1000
    labeller: Labeller = "llm"
    #: MiniLM labeller: a class is a candidate when its summary cosine is >= ``minilm_floor`` and within
    #: ``minilm_margin`` of the best; verification keeps it when the user's own text has a cosine >=
    #: ``minilm_verify_floor`` with it. Measured on the sample corpus: the best summary-class cosine has
    #: median 0.25 (5th percentile 0.15), the user text's cosine with that class median 0.20 (5th pct. 0.06).
    minilm_floor: float = 0.15
    minilm_margin: float = 0.05
    minilm_verify_floor: float = 0.1
    # ---- keyword categories (E.5)
    keywords_per_call: int = 80
    keyword_labeller: Labeller = "llm"
    # ---- questions (E.6-E.8)
    min_support: int = 50
    min_support_user: int = 10
    top3_share: float = 0.15
    max_per_value: int = 2
    #: cap per combination (and keyword category). Table 8's counts cluster at 93-100 per combination (and
    #: at multiples of ~95 for keyword targets), which suggests a cap of 100; the paper states none.
    max_per_combination: int | None = 100
    n_options: int = 10
    subset_fraction: float = 0.10
    qc_z: float = Z_090
    qc_draws: int = 1000
    qc_k: int = 10
    #: conversations the QC context scorer retrieves per question
    qc_retrieve: int = 100
    seed: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def fingerprint(self) -> dict[str, Any]:
        return asdict(self)


PAPER = Settings()

TINY = replace(
    PAPER, profile="tiny", tokenizer="smollm2", content_words=48, max_attempts=2, intent_source="summary",
    keyword_format="pairs", keywords_grounded=True,
    topic_clusters=8, topic_batch=16, topic_rounds=3, topic_patience=1, taxonomy_attempts=1, taxonomy_writer="cluster-terms",
    initial_classes=12, max_classes=16,
    subtopic_ks=(2, 3, 4), subtopic_top_ks=2, subtopic_batch=16, labeller="minilm", keyword_labeller="minilm",
    min_support=6, min_support_user=3, max_per_combination=2, qc_retrieve=30,
)

PROFILES = {"tiny": TINY, "paper": PAPER}


def settings_for(profile: str, seed: int = 0, **overrides: Any) -> Settings:
    """The settings of ``profile`` (``tiny`` or ``paper``) with ``seed`` and any field overridden."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; expected one of {sorted(PROFILES)}")
    return replace(PROFILES[profile], seed=seed, **overrides)


#: The fields the card lists, with the words it uses for them.
_CARD_FIELDS = (
    ("minhash_ngrams", "MinHash word n-grams"), ("minhash_bands", "LSH bands"), ("minhash_rows", "LSH rows per band"),
    ("max_tokens", "max tokens per conversation"), ("tokenizer", "length-filter tokenizer"),
    ("min_sessions", "min sessions per user"), ("content_words", "words of user text an annotation prompt shows"),
    ("intent_source", "the intent prompt reads"), ("keyword_format", "keyword answer format"),
    ("keywords_grounded", "keywords must appear in the text"),
    ("max_attempts", "LLM calls per field at most"), ("topic_clusters", "k-means clusters (topics)"),
    ("topic_batch", "summaries per taxonomy round"), ("topic_rounds", "taxonomy rounds at most"),
    ("taxonomy_writer", "topic and subtopic taxonomy writer"),
    ("taxonomy_attempts", "LLM calls per taxonomy request at most"),
    ("topic_patience", "early stop after rounds without a better score"), ("subtopic_ks", "subtopic K searched"),
    ("subtopic_top_ks", "K kept by silhouette"), ("labeller", "topic/subtopic labeller and verifier"),
    ("keyword_labeller", "keyword categoriser"), ("min_support", "min supporting conversations"),
    ("min_support_user", "min supporting conversations with a user condition"),
    ("top3_share", "min share of the top-3 target values"), ("max_per_value", "questions per top-1 value at most"),
    ("max_per_combination", "questions per combination at most"), ("qc_z", "QC z (one-sided 90%)"),
    ("qc_draws", "Monte Carlo draws for s_random"), ("subset_fraction", "stratified subset fraction"),
)


#: The settings only the LLM taxonomy writer reads (TnT-LLM's rounds and their retries).
_LLM_WRITER_FIELDS = frozenset({"topic_batch", "topic_rounds", "taxonomy_attempts", "topic_patience"})


def describe(settings: Settings) -> list[list[Any]]:
    """Rows ``[setting, this build, paper, tiny]`` for the card: every value next to both profiles'; the
    LLM writer's settings say they were not used when the build's taxonomy writer is the stand-in."""
    def show(value: Any) -> str:
        if isinstance(value, tuple):
            return ", ".join(str(v) for v in value)
        return "whole dialogue" if value is None else str(value)

    def this_build(name: str) -> str:
        value = show(getattr(settings, name))
        if name in _LLM_WRITER_FIELDS and settings.taxonomy_writer == CLUSTER_TERMS:
            return f"{value} (not used: the writer is {settings.taxonomy_writer})"
        return value

    return [[label, this_build(name), show(getattr(PAPER, name)), show(getattr(TINY, name))]
            for name, label in _CARD_FIELDS]
