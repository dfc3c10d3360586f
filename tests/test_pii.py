"""The PII probe set of issue 16 through the scrubber alone and through a published dataset loaded the way
users load it (plain ``datasets.load_dataset``)."""

from __future__ import annotations

import uuid
from pathlib import Path

import datasets
import pytest
from _pii_probe import EARLIER_NO_PII, EARLIER_PII, NO_PII, PII_PROBE

from convohub.cli import main
from convohub.conversations import Conversation, Turn, scrub_pii, scrub_pii_counts, write_wildchat
from convohub.conversations.pii import NOT_SCRUBBED, PLACEHOLDERS, pii_spans
from convohub.conversations.wildchat import to_wildchat_row
from convohub.hub import read_card


def test_probe_set_is_large_and_varied() -> None:
    kinds = {placeholder for _, masked in PII_PROBE for placeholder in PLACEHOLDERS.values() if placeholder in masked}
    assert len(PII_PROBE) >= 40 and kinds == set(PLACEHOLDERS.values())


@pytest.mark.parametrize(("text", "expected"), PII_PROBE + EARLIER_PII)
def test_probe_string_is_masked(text: str, expected: str) -> None:
    assert scrub_pii(text) == expected


@pytest.mark.parametrize("text", NO_PII + EARLIER_NO_PII)
def test_text_without_pii_is_intact(text: str) -> None:
    assert scrub_pii(text) == text and scrub_pii_counts(text) == {}


def test_overlapping_detections_become_one_placeholder() -> None:
    # a spaced card also looks like phone numbers; a URL secret holds digits that look like a phone
    assert scrub_pii("pay with 4111 1111 1111 1111 now") == "pay with [CARD] now"
    assert scrub_pii("GET /v1?token=4155550100abc") == "GET /v1?token=[KEY]"
    assert scrub_pii_counts("a@example.com, b@example.org, +1 415-555-0100") == {"EMAIL": 2, "PHONE": 1}


def test_the_public_suffix_list_is_never_fetched(monkeypatch: pytest.MonkeyPatch) -> None:
    import requests

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the scrubber tried the network")

    monkeypatch.setattr(requests.Session, "request", refuse)
    assert scrub_pii(f"mail {uuid.uuid4().hex[:8]}@example.co.uk") == "mail [EMAIL]"


def test_every_probe_is_masked_in_a_built_dataset(tmp_path: Path) -> None:
    """User turns carry the probe strings, assistant turns the PII-free texts; the published rows (plain
    ``load_dataset``) hold exactly the masked probes and the untouched texts, and the card says what the
    scrubber leaves."""
    convs = [Conversation(f"probe-{i}", "gpt-4", None, f"user-{i}",
                          turns=(Turn("user", text), Turn("assistant", NO_PII[i % len(NO_PII)])))
             for i, (text, _) in enumerate(PII_PROBE)]
    source = write_wildchat([to_wildchat_row(c) for c in convs], tmp_path / "probe.jsonl")
    assert main(["datasets", "build", "wildchat-sample", "--source", str(source), "--out", str(tmp_path / "out")]) == 0
    folder = tmp_path / "out" / "datasets" / "convohub" / "wildchat-sample"
    loaded = datasets.load_dataset(str(folder), "conversations", cache_dir=str(tmp_path / "cache"))
    rows = [row for split in loaded.values() for row in split]
    assert sorted(row["turns"][0]["content"] for row in rows) == sorted(masked for _, masked in PII_PROBE)
    for row in rows:
        assert row["redacted"] and row["turns"][0]["redacted"]
        assert row["turns"][1]["content"] in NO_PII and not row["turns"][1]["redacted"]
    _, body = read_card(folder / "README.md")
    assert NOT_SCRUBBED in body.replace("\n", " ") and "`[IBAN]`" in body


def test_spans_are_what_the_scrubber_replaces() -> None:
    text = "card 4111 1111 1111 1111, mail ana@example.com"
    assert pii_spans(text) == [(5, 24, "CARD"), (31, 46, "EMAIL")]
    assert [text[s:e] for s, e, _ in pii_spans(text)] == ["4111 1111 1111 1111", "ana@example.com"]
    assert pii_spans("version 1.2.3") == []
