"""EXTRACT's component: extractors, the frozen-mapping rule, and the trained model's input and output format.

An extractor answers "what is the value of key K in this event?" as a raw value (usually a string) or
None (protocol: :class:`convohub.reqap.engine.protocols.Extractor`); the engine converts it with the
``attr_types`` entry (:func:`convohub.reqap.engine.convert.convert`) and drops the event when it is None.

* :class:`DirectExtractor` -- key lookup (with optional aliases), the paper's "exact match" ablation and
  the named offline stand-in (``--extractor lookup``);
* :class:`FrozenMappingExtractor` -- wraps a (slow) per-event extractor with the spec's frozen-mapping
  rule: once >= 70% of the first 50 answers for a (source, key) equal the value of one event key, later
  events of that source are answered by direct lookup of that key;
* :class:`ModelExtractor` -- the trained EXTRACT model (training/reqap_extract) behind that rule.

The model's format is defined here once, for inference and for the training pairs
(:mod:`convohub.reqap.data.extract`): input :func:`extraction_input` (``Attribute: {key}, Event: {key:
json(value) lines}``, plus the persona's names when known), output a short value or ``null``
(:data:`NULL`), read back by :func:`convert_value`; :func:`generate_values` decodes greedily in batches. A
seq2seq model (the paper's BART) reads the input text as it is; a causal one (SmolLM2 with LoRA, the offline
profile) reads it as the user's turn of a chat (:func:`extraction_messages`) and answers as the assistant.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime, time
from pathlib import Path
from time import monotonic
from typing import Any

from convohub.reqap.engine.convert import is_null
from convohub.reqap.engine.pace import Pace, TimeCheck

__all__ = [
    "DEFAULT_ALIASES", "DirectExtractor", "FrozenMappingExtractor", "ModelExtractor", "convert_value",
    "extraction_input", "extraction_messages", "generate_values", "is_causal", "load_extract_model",
    "model_attributes", "normalise", "persona_names", "verbalise"
]

#: convohub's small alias table for keys the paper's example trees ask for but PerQA events name
#: differently; looked up only when the requested key itself is absent.
DEFAULT_ALIASES: dict[str, tuple[str, ...]] = {
    "purchase_date": ("start_date",),
    "amount_spent": ("price",),
    "quantity": ("product_quantity",),
    "artist_names": ("song_artist",),
    "artist": ("song_artist",),
    "date": ("start_date",),
    "datetime": ("start_datetime",),
}


class DirectExtractor:
    """Key lookup: the event's own key, else the first alias present (see :data:`DEFAULT_ALIASES`)."""

    def __init__(self, aliases: Mapping[str, Sequence[str]] | None = None) -> None:
        self.aliases = dict(DEFAULT_ALIASES if aliases is None else aliases)

    def lookup(self, event: dict[str, Any], key: str) -> Any:
        if key in event and not is_null(event[key]):
            return event[key]
        for alias in self.aliases.get(key, ()):
            if alias in event and not is_null(event[alias]):
                return event[alias]
        return None

    def extract(self, events: Sequence[dict[str, Any]], key: str, check_time: TimeCheck | None = None) -> list[Any]:
        return [self.lookup(e, key) for e in events]


class FrozenMappingExtractor:
    """Applies the frozen-mapping rule around a (slow) extraction function, e.g. a seq2seq model.

    ``extract_many(events, key) -> values`` answers a batch (``extract_one(event, key)`` one event; give
    either). For every (source, key) the first ``window`` answers are compared with the event's own values;
    if at least ``share`` of them equal the value of one event key K, the mapping freezes and later events
    of that source read K directly (no model call). Batches are cut at the window's end, so the events the
    model answers are exactly those it would answer one at a time.
    """

    def __init__(self, extract_one: Callable[[dict[str, Any], str], Any] | None = None, *,
                 extract_many: Callable[[Sequence[dict[str, Any]], str], list[Any]] | None = None,
                 window: int = 50, share: float = 0.7, batch_size: int = 32) -> None:
        if (extract_one is None) == (extract_many is None):
            raise ValueError("give extract_one or extract_many")
        self.extract_many = extract_many or (lambda events, key: [extract_one(e, key) for e in events])
        self.window = window
        self.share = share
        self.batch_size = batch_size
        self.seen: dict[tuple[str, str], list[str | None]] = {}
        self.frozen: dict[tuple[str, str], str | None] = {}
        self.model_calls = 0
        #: seconds per event the extraction function answered, over every call so far: a batch is estimated
        #: from it against the question's deadline
        self.pace = Pace()

    def _matching_key(self, event: dict[str, Any], value: Any) -> str | None:
        if is_null(value):
            return None
        text = str(value).strip()
        for k, v in event.items():
            if k in ("id", "merged_ids") or v is None:
                continue
            if (v.isoformat() if isinstance(v, (date, time)) else str(v)).strip() == text:
                return k
        return None

    def _record(self, group: tuple[str, str], event: dict[str, Any], value: Any) -> None:
        seen = self.seen.setdefault(group, [])
        if len(seen) < self.window:
            seen.append(self._matching_key(event, value))
            if len(seen) == self.window:
                top, n = Counter(seen).most_common(1)[0]
                if top is not None and n >= self.share * self.window:
                    self.frozen[group] = top

    def extract(self, events: Sequence[dict[str, Any]], key: str, check_time: TimeCheck | None = None) -> list[Any]:
        """The values of ``key``; before each batch for the extraction function, ``check_time`` (when given) gets
        the batch's estimate at :attr:`pace`, so a question's deadline stops the work between batches. Events
        answered by a frozen mapping cost nothing and are not estimated."""
        out: list[Any] = [None] * len(events)
        pending: list[int] = []  # events for the model, answered in one batch
        calls_before = self.model_calls

        def flush() -> None:
            if check_time is not None:
                more = "more " if self.model_calls > calls_before else ""
                check_time(self.pace.estimate(len(pending)),
                           f"extracting {key!r} from {len(pending)} {more}of {len(events)} events")
            started = monotonic()
            values = self.extract_many([events[i] for i in pending], key)
            self.pace.add(len(pending), monotonic() - started)
            self.model_calls += len(pending)
            for i, value in zip(pending, values, strict=True):
                out[i] = value
                self._record((str(events[i].get("source")), key), events[i], value)
            pending.clear()

        for n, e in enumerate(events):
            group = (str(e.get("source")), key)
            decided = len(self.seen.get(group, ()))
            if group not in self.frozen and pending and decided < self.window:
                undecided = decided + sum(1 for i in pending if (str(events[i].get("source")), key) == group)
                if undecided >= self.window:  # the window of this group closes: decide before going on
                    flush()
            frozen_key = self.frozen.get(group)
            if frozen_key is not None:
                out[n] = e.get(frozen_key)
                continue
            pending.append(n)
            if len(pending) >= self.batch_size:
                flush()
        if pending:
            flush()
        return out


NULL = "null"


_NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?|[-+]?\.\d+")


def _number(text: str) -> float | None:
    """The leading number of ``text``, ignoring trailing units ("84.44 EUR", "34 minutes", "5.3km")."""
    match = _NUMBER.search(text)
    if match is None or text[:match.start()].strip() not in ("", "$", "€", "£"):
        return None
    return float(match.group().replace(",", ""))


def convert_value(text: str | None, attr_type: str | type = "str") -> Any:
    """Convert a generated value to ``attr_type`` (date, time, datetime, float, int, str, list, or the type
    objects). ``"null"``, empty and unparseable values give ``None``: EXTRACT drops such events anyway, and
    a wrong-typed value must not crash a whole operator tree."""
    if text is None:
        return None
    text = str(text).strip()
    if not text or text.lower() in (NULL, "none"):
        return None
    name = attr_type if isinstance(attr_type, str) else attr_type.__name__
    try:
        if name in ("float", "int"):
            number = _number(text)
            if number is None:
                return None
            return number if name == "float" else round(number)
        if name == "date":
            return date.fromisoformat(text[:10])
        if name == "time":
            return time.fromisoformat(text.split(" ")[-1] if " " in text else text)
        if name == "datetime":
            number = _number(text) if re.fullmatch(r"[-+]?\d+(?:\.\d+)?", text) else None
            return datetime.fromtimestamp(number) if number is not None else datetime.fromisoformat(text)
        if name == "list":
            if text.startswith("["):
                parsed = json.loads(text)
                return [str(v) for v in parsed] if isinstance(parsed, list) else None
            return [p.strip() for p in re.split(r",\s*|\s+and\s+", text) if p.strip()]
        if name == "bool":
            return {"true": True, "false": False, "yes": True, "no": False}.get(text.lower())
    except (ValueError, json.JSONDecodeError, OverflowError, OSError):
        return None
    if name == "str":
        return text
    raise ValueError(f"unknown attr_type {attr_type!r}; "
                     "expected date, time, datetime, float, int, str, list or bool")


def verbalise(attributes: Mapping[str, Any]) -> str:
    """``key: json(value)`` lines, the event text of both the EXTRACT and the RETRIEVE models."""
    return "\n".join(f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in attributes.items())


def persona_names(persona: Mapping[str, Any]) -> str:
    """Names of the persona, relatives, friends and pets, so "my mother" can be resolved from an event."""
    parts = [f"me: {persona.get('name')}"] if persona.get("name") else []
    for role in ("mother", "father", "partner", "siblings", "kids", "pets", "friends"):
        value = persona.get(role)
        items = value if isinstance(value, list) else [value] if value else []
        names = [i.get("name", "") if isinstance(i, Mapping) else str(i) for i in items]
        if any(names):
            parts.append(f"{role}: {', '.join(n for n in names if n)}")
    return "; ".join(parts)


def extraction_input(attribute: str, attributes: Mapping[str, Any], names: str = "") -> str:
    """The model input for one attribute of one event (``names``: :func:`persona_names`, optional)."""
    text = f"Attribute: {attribute}, Event: {verbalise(attributes)}"
    return f"{text}\nPersona: {names}" if names else text


def normalise(text: str) -> str:
    """What exact match compares: whitespace-stripped text (values are case-sensitive names)."""
    return " ".join(str(text).split())


def extraction_messages(text: str) -> list[dict[str, str]]:
    """The chat a causal EXTRACT model reads: the :func:`extraction_input` text as the user's turn (the chat
    template adds its own system prompt), answered by the value or ``null``. Training and inference share it."""
    return [{"role": "user", "content": text}]


def is_causal(model: Any) -> bool:
    """A decoder-only EXTRACT model (SmolLM2 and LoRA, read through its chat template), not a seq2seq one."""
    return not bool(getattr(model.config, "is_encoder_decoder", False))


def load_extract_model(model_dir: str | Path, *, causal: bool | None = None) -> tuple[Any, Any]:
    """``(tokenizer, model)`` of a trained EXTRACT folder (or a base model's Hub id), seq2seq (BART, T5) or causal
    (``None``: as its config says), in eval mode."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

    if Path(model_dir).exists() and not (Path(model_dir) / "config.json").is_file():
        raise FileNotFoundError(f"{model_dir}: not a model folder (no config.json); give the output folder of "
                                "training/reqap_extract")
    if causal is None:
        causal = not bool(getattr(AutoConfig.from_pretrained(str(model_dir)), "is_encoder_decoder", False))
    model_class = AutoModelForCausalLM if causal else AutoModelForSeq2SeqLM
    return AutoTokenizer.from_pretrained(str(model_dir)), model_class.from_pretrained(str(model_dir)).eval()


def causal_prompts(tokenizer: Any, inputs: Sequence[str], max_source_length: int) -> list[str]:
    """A causal model's prompts: each input cut to its first ``max_source_length`` tokens, then put through the
    chat template (so a long event never loses the generation prompt at the end)."""
    prompts = []
    for text in inputs:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        clipped = text if len(ids) <= max_source_length else tokenizer.decode(ids[:max_source_length])
        prompts.append(tokenizer.apply_chat_template(extraction_messages(clipped), tokenize=False,
                                                     add_generation_prompt=True))
    return prompts


def generate_values(model: Any, tokenizer: Any, inputs: Sequence[str], *, batch_size: int = 32,
                    max_source_length: int = 512, max_new_tokens: int = 64,
                    no_repeat_ngram_size: int | None = None) -> list[str]:
    """Greedy decoding of many inputs (``no_repeat_ngram_size=None``: the model's generation config). A causal
    model reads each input as :func:`extraction_messages` through its chat template, left-padded, and only
    its new tokens are decoded."""
    import torch

    model.eval()
    kwargs: dict[str, Any] = {"do_sample": False, "num_beams": 1, "max_new_tokens": max_new_tokens}
    if no_repeat_ngram_size is not None:
        kwargs["no_repeat_ngram_size"] = no_repeat_ngram_size
    causal = is_causal(model)
    if causal:
        tokenizer.padding_side = "left"
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        kwargs["pad_token_id"] = tokenizer.pad_token_id
    out: list[str] = []
    for start in range(0, len(inputs), batch_size):
        texts = list(inputs[start:start + batch_size])
        if causal:
            batch = tokenizer(causal_prompts(tokenizer, texts, max_source_length), return_tensors="pt", padding=True,
                              add_special_tokens=False)
        else:
            batch = tokenizer(texts, return_tensors="pt", padding=True, truncation=True, max_length=max_source_length)
        with torch.no_grad():
            ids = model.generate(**batch, **kwargs)
        if causal:
            ids = ids[:, batch["input_ids"].shape[1]:]
        out += [normalise(t) for t in tokenizer.batch_decode(ids, skip_special_tokens=True)]
    return out


#: Engine-side keys the model never saw in training (identifiers, typed spans, bookkeeping).
_SKIP = frozenset({"id", "structured_event_id", "event_type", "source", "merged_ids", "start_datetime",
                   "end_datetime", "properties_mentioned"})


_TEMPORAL = ("start_date", "start_time", "end_date", "end_time")


def model_attributes(event: dict[str, Any]) -> dict[str, Any]:
    """The attributes of an engine event as training saw them: temporal keys first (ISO text), then data."""
    out: dict[str, Any] = {}
    for k in _TEMPORAL:
        v = event.get(k)
        if v is not None:
            out[k] = v.isoformat() if isinstance(v, (date, time)) else str(v)
    for k, v in event.items():
        if k not in _SKIP and k not in out:
            out[k] = v.isoformat() if isinstance(v, (date, time)) else v
    return out


class ModelExtractor:
    """Extractor backed by a trained EXTRACT model folder: greedy decoding in batches behind the
    frozen-mapping rule, ``null`` -> None; with :meth:`use_persona` the inputs carry the persona's names
    (as training did when its pairs had them, see ``PairConfig.with_persona_names``)."""

    def __init__(self, model_dir: str | Path, *, max_source_length: int = 512, max_new_tokens: int = 64,
                 window: int = 50, share: float = 0.7, batch_size: int = 32) -> None:
        self.model_dir = Path(model_dir)
        if not (self.model_dir / "config.json").is_file():
            raise FileNotFoundError(f"{self.model_dir}: not a model folder (no config.json); give the output "
                                    "folder of training/reqap_extract")
        self.tokenizer, self.model = load_extract_model(self.model_dir)
        self.max_source_length = max_source_length
        self.max_new_tokens = max_new_tokens
        self.batch_size = batch_size
        self.names = ""
        saved = self.model_dir / "training_args.json"  # names go in only if training put them in
        self.with_names = saved.is_file() and bool(
            json.loads(saved.read_text(encoding="utf-8")).get("script", {}).get("with_persona_names"))
        self._frozen = FrozenMappingExtractor(extract_many=self._extract_many, window=window, share=share,
                                              batch_size=batch_size)

    @property
    def model_calls(self) -> int:
        return self._frozen.model_calls

    def use_persona(self, persona: Mapping[str, Any] | None) -> None:
        """Pass the persona's names (me, relatives, friends, pets) with every input from now on."""
        self.names = persona_names(persona) if persona and self.with_names else ""

    def _extract_many(self, events: Sequence[dict[str, Any]], key: str) -> list[Any]:
        inputs = [extraction_input(key, model_attributes(e), self.names) for e in events]
        values = generate_values(self.model, self.tokenizer, inputs, batch_size=self.batch_size,
                                 max_source_length=self.max_source_length, max_new_tokens=self.max_new_tokens)
        return [None if v.strip().lower() in ("", "null", "none") else v for v in values]

    def extract(self, events: Sequence[dict[str, Any]], key: str, check_time: TimeCheck | None = None) -> list[Any]:
        return self._frozen.extract(events, key, check_time)
