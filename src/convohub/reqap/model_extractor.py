"""EXTRACT with the trained seq2seq model (training/reqap_extract), behind the frozen-mapping rule.

The model reads ``Attribute: {key}, Event: {key: json(value) lines}`` -- the same input the training pairs
use (:func:`convohub.reqap.extract_pairs.extraction_input`) -- and answers a short value or ``null``.
:class:`~convohub.reqap.extraction.FrozenMappingExtractor` switches a (source, key) to direct lookup once
the model's first answers agree with one event key, so long event lists cost few model calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, time
from pathlib import Path
from typing import Any

from convohub.reqap.extraction import FrozenMappingExtractor

__all__ = ["ModelExtractor", "model_attributes"]

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
    """Extractor backed by a trained EXTRACT model folder (greedy decoding, ``null`` -> None)."""

    def __init__(self, model_dir: str | Path, *, max_source_length: int = 512, max_new_tokens: int = 64,
                 window: int = 50, share: float = 0.7) -> None:
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        self.model_dir = Path(model_dir)
        if not (self.model_dir / "config.json").is_file():
            raise FileNotFoundError(f"{self.model_dir}: not a model folder (no config.json); give the output "
                                    "folder of training/reqap_extract")
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_dir)
        self.model = AutoModelForSeq2SeqLM.from_pretrained(self.model_dir)
        self.max_source_length = max_source_length
        self.max_new_tokens = max_new_tokens
        self._frozen = FrozenMappingExtractor(self._extract_one, window=window, share=share)

    @property
    def model_calls(self) -> int:
        return self._frozen.model_calls

    def _extract_one(self, event: dict[str, Any], key: str) -> Any:
        from convohub.reqap.extract_pairs import extraction_input
        from convohub.reqap.extract_training import generate_values

        [value] = generate_values(self.model, self.tokenizer, [extraction_input(key, model_attributes(event))],
                                  batch_size=1, max_source_length=self.max_source_length,
                                  max_new_tokens=self.max_new_tokens)
        return None if value.strip().lower() in ("", "null", "none") else value

    def extract(self, events: Sequence[dict[str, Any]], key: str) -> list[Any]:
        return self._frozen.extract(events, key)
