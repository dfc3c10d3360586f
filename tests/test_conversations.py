"""Tests of convohub.conversations: record, WildChat I/O, the seeded generator and the PII scrubber."""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from convohub.conversations import (
    Conversation,
    Turn,
    WildChatFormatError,
    conversation_features,
    from_wildchat_row,
    generate_wildchat_sample,
    iter_wildchat_rows,
    make_user_id,
    read_wildchat,
    scrub_conversation,
    scrub_pii_counts,
    to_wildchat_row,
    write_wildchat,
)

MODERATION = ("openai_moderation", "detoxify_moderation")


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    return generate_wildchat_sample(n_users=40, seed=0)


@pytest.fixture(scope="module")
def convs(rows: list[dict[str, Any]]) -> list[Conversation]:
    return [from_wildchat_row(row, index=i) for i, row in enumerate(rows)]


def _without_moderation(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in MODERATION}


def _user_texts(convs: list[Conversation]) -> list[str]:
    return [t.content for c in convs for t in c.user_turns()]


# ---------------------------------------------------------------------------------------------- reader


def test_row_round_trip(rows: list[dict[str, Any]], convs: list[Conversation]) -> None:
    for row, conv in zip(rows, convs, strict=True):
        assert _without_moderation(to_wildchat_row(conv)) == _without_moderation(row)
        assert from_wildchat_row(to_wildchat_row(conv)) == conv


def test_record_dict_round_trip(convs: list[Conversation]) -> None:
    for conv in convs[:50]:
        assert Conversation.from_dict(conv.to_dict(with_source_ids=True)) == conv
        published = conv.to_dict()
        assert "hashed_ip" not in published and "user_agent" not in published
        assert Conversation.from_dict(published) == conv.without_source_ids()
        assert json.loads(json.dumps(published)) == published


def test_record_fields(convs: list[Conversation]) -> None:
    conv = next(c for c in convs if c.n_turns >= 3)
    assert conv.n_turns == len(conv.user_turns()) == len(conv.turns) // 2
    assert all(t.role == "user" for t in conv.user_turns())
    assert conv.user_id == make_user_id(conv.hashed_ip or "", conv.user_agent)
    assert conv.timestamp is not None and conv.timestamp.tzinfo is not None
    assert conv.to_dict()["timestamp"].endswith("+00:00")
    with pytest.raises(ValueError, match="role"):
        Turn(role="system", content="x")


def test_user_id_combines_ip_and_user_agent(rows: list[dict[str, Any]], convs: list[Conversation]) -> None:
    by_ip: dict[str, set[str]] = {}
    for conv in convs:
        by_ip.setdefault(conv.hashed_ip or "", set()).add(conv.user_id)
    assert any(len(ids) > 1 for ids in by_ip.values()), "the sample has a shared IP with two browsers"


def test_reader_tolerates_missing_optional_fields() -> None:
    row = {"conversation_hash": "abc", "conversation": [
        {"role": "user", "content": "hi", "hashed_ip": "ip1", "header": {"user-agent": "UA"},
         "country": "Spain", "language": "Spanish", "timestamp": "2023-05-01T10:00:00Z"},
        {"role": "assistant", "content": "hello", "timestamp": "2023-05-01 10:00:05"}]}
    conv = from_wildchat_row(row)
    assert conv.user_id == make_user_id("ip1", "UA")
    assert (conv.country, conv.language, conv.model) == ("Spain", "Spanish", "")
    assert conv.timestamp == datetime(2023, 5, 1, 10, 0, 5, tzinfo=timezone.utc)
    bare = from_wildchat_row({"conversation_hash": "xyz", "conversation": [{"role": "user", "content": "q"}]})
    assert bare.user_id.startswith("anon_") and bare.timestamp is None


@pytest.mark.parametrize(("row", "pattern"), [
    ({"conversation": []}, r"row 7 \(conversation_hash=None\): lacks required field 'conversation_hash'"),
    ({"conversation_hash": "h1"}, r"row 7 \(conversation_hash='h1'\): lacks required field 'conversation'"),
    ({"conversation_hash": "h2", "conversation": [{"role": "user", "content": "a"}, {"role": "assistant"}]},
     r"row 7 \(conversation_hash='h2'\): conversation\[1\] lacks required field 'content'"),
    ({"conversation_hash": "h3", "conversation": [{"content": "a"}]},
     r"conversation_hash='h3'\): conversation\[0\] lacks required field 'role'"),
    ({"conversation_hash": "h4", "conversation": [{"role": "robot", "content": "a"}]}, r"h4.*unknown role 'robot'"),
    ({"conversation_hash": "h5", "conversation": "text"}, r"h5.*'conversation' is str"),
    ({"conversation_hash": "h6", "timestamp": "yesterday", "conversation": []}, r"h6.*'timestamp'"),
])
def test_reader_errors_name_row_and_field(row: dict[str, Any], pattern: str) -> None:
    with pytest.raises(WildChatFormatError, match=pattern):
        from_wildchat_row(row, index=7)


@pytest.mark.parametrize("name", ["rows.jsonl", "rows.json", "rows.parquet"])
def test_read_each_format(tmp_path: Path, rows: list[dict[str, Any]], convs: list[Conversation], name: str) -> None:
    path = write_wildchat(rows[:60], tmp_path / name)
    assert list(read_wildchat(path, batch_size=16)) == convs[:60]


def test_read_folder_and_error_names_file(tmp_path: Path, rows: list[dict[str, Any]],
                                          convs: list[Conversation]) -> None:
    write_wildchat(rows[:20], tmp_path / "a" / "part-0.parquet")
    write_wildchat(rows[20:30], tmp_path / "b" / "part-1.jsonl")
    assert list(read_wildchat(tmp_path)) == convs[:30]
    assert sum(1 for _ in iter_wildchat_rows(tmp_path)) == 30
    bad = tmp_path / "c" / "bad.jsonl"
    bad.parent.mkdir()
    bad.write_text(json.dumps({"conversation_hash": "zz"}) + "\n", encoding="utf-8")
    with pytest.raises(WildChatFormatError, match=r"bad\.jsonl: row 0 \(conversation_hash='zz'\).*'conversation'"):
        list(read_wildchat(tmp_path))


def test_parquet_dataset_round_trip(tmp_path: Path, convs: list[Conversation]) -> None:
    import datasets

    records = [c.to_dict() for c in convs[:80]]
    ds = datasets.Dataset.from_list(records, features=conversation_features())
    ds.to_parquet(str(tmp_path / "train.parquet"))
    loaded = datasets.load_dataset("parquet", data_files=str(tmp_path / "train.parquet"), split="train")
    assert loaded.features == conversation_features()
    assert [Conversation.from_dict(r) for r in loaded] == [c.without_source_ids() for c in convs[:80]]


# ------------------------------------------------------------------------------------------- generator


def test_generator_is_deterministic(rows: list[dict[str, Any]]) -> None:
    again = generate_wildchat_sample(n_users=40, seed=0)
    assert again == rows
    other = generate_wildchat_sample(n_users=40, seed=1)
    assert [r["conversation_hash"] for r in other] != [r["conversation_hash"] for r in rows]


def test_generator_is_fast() -> None:
    import time

    begin = time.perf_counter()
    out = generate_wildchat_sample(n_users=40, sessions_per_user=(13, 13), seed=3)
    assert len(out) >= 500
    assert time.perf_counter() - begin < 2.0


def test_generator_users_places_languages_time(convs: list[Conversation]) -> None:
    sessions = Counter(c.user_id for c in convs)
    assert len(sessions) == 40 and min(sessions.values()) >= 10
    assert len({c.country for c in convs}) >= 6
    assert all(c.state for c in convs)
    languages = Counter(c.language for c in convs)
    assert languages.most_common(1)[0][0] == "English" and len(languages) >= 4
    weeks = {c.timestamp.isocalendar()[:2] for c in convs if c.timestamp}
    assert len(weeks) >= 10
    assert all(datetime(2023, 4, 9, tzinfo=timezone.utc) <= c.timestamp < datetime(2023, 7, 10, tzinfo=timezone.utc)
               for c in convs if c.timestamp)


def test_generator_topics_and_keywords(convs: list[Conversation]) -> None:
    text = " ".join(_user_texts(convs))
    for keyword in ("Python", "Minecraft", "Oppenheimer", "Marie Curie", "lasagna", "Kyoto", "black holes",
                    "Taylor Swift", "index funds", "data analyst", "meditation", "cover letter"):
        assert keyword in text, keyword


def test_generator_multi_turn_feedback_and_references(convs: list[Conversation]) -> None:
    multi = [c for c in convs if c.n_turns > 1]
    assert 0.4 <= len(multi) / len(convs) <= 0.8
    assert max(c.n_turns for c in convs) == 8
    follow_ups = [t.content for c in multi for t in c.user_turns()[1:]]
    assert any("Thanks, that works perfectly!" in t for t in follow_ups)
    assert sum(t.startswith(("No, that's wrong", "That's not", "That's incorrect")) for t in follow_ups) >= 10
    assert any(t.startswith("No, that's wrong, the capital of") for t in follow_ups)
    assert any(t in ("Make it shorter.", "Rewrite it as bullet points.") for t in follow_ups)
    assert any(t in ("Continue", "Go on.") for t in follow_ups)
    # A follow-up naming an earlier turn's keyword that is not in the previous user turn.
    refer = 0
    for conv in multi:
        users = conv.user_turns()
        for i, turn in enumerate(users[2:], start=2):
            match = re.match(r"(?:Going back to my earlier question about|Earlier you mentioned) (.+?)[:.]",
                             turn.content)
            if match and match.group(1) not in users[i - 1].content:
                assert any(match.group(1) in u.content for u in users[: i - 1])
                refer += 1
    assert refer >= 5
    assert any(c.language != "English" and c.n_turns > 1 for c in convs)
    assert any(c.toxic for c in convs)


def test_generator_has_pii_and_duplicates(convs: list[Conversation]) -> None:
    kinds = Counter()
    for text in _user_texts(convs):
        kinds.update(scrub_pii_counts(text))
    assert set(kinds) == {"EMAIL", "PHONE", "IP", "CARD", "KEY"}
    contents = Counter(tuple(t.content.lower() for t in c.turns) for c in convs)
    assert sum(n - 1 for n in contents.values() if n > 1) >= 3  # exact duplicates
    kept: dict[tuple[str, ...], str] = {}
    for conv in convs:
        kept.setdefault(tuple(t.content.lower() for t in conv.turns), conv.user_id)
    assert min(Counter(kept.values()).values()) >= 10  # users keep >= 10 sessions after exact dedup
    firsts = {c.turns[0].content for c in convs}
    assert any(text.endswith(", please?") and any(f != text and f.startswith(text[:-9]) for f in firsts)
               for text in firsts)  # near duplicates
    assert len({c.conversation_id for c in convs}) == len(convs)


# ------------------------------------------------------------------------------------------------- PII

def test_scrub_counts_and_conversation() -> None:
    text = "Mail a@example.com or b@example.org, call +1 415-555-0100 from 10.0.0.7"
    assert scrub_pii_counts(text) == {"EMAIL": 2, "PHONE": 1, "IP": 1}
    conv = Conversation("h", "gpt-4", None, "u_1", turns=(Turn("user", text), Turn("assistant", "Noted.")))
    clean = scrub_conversation(conv)
    assert clean.turns[0].content == "Mail [EMAIL] or [EMAIL], call [PHONE] from [IP]"
    assert clean.turns[0].redacted and clean.redacted and not clean.turns[1].redacted
    assert scrub_conversation(clean) == clean
