"""Conversation records and WildChat I/O shared by the WildChat-derived systems.

* :mod:`~convohub.conversations.record`: the normalised :class:`Conversation` / :class:`Turn` record and
  its ``datasets.Features``;
* :mod:`~convohub.conversations.wildchat`: readers/writers for the public WildChat-1M row format;
* :mod:`~convohub.conversations.sample`: a seeded generator of WildChat-format rows for offline runs;
* :mod:`~convohub.conversations.pii`: the PII scrubber applied before anything is published.
"""

from convohub.conversations.pii import (
    scrub_conversation,
    scrub_conversation_with_counts,
    scrub_pii,
    scrub_pii_counts,
    scrub_pii_with_counts,
)
from convohub.conversations.record import (
    Conversation,
    Turn,
    conversation_features,
    format_timestamp,
    make_user_id,
    parse_timestamp,
)
from convohub.conversations.sample import generate_wildchat_sample
from convohub.conversations.wildchat import (
    WildChatFormatError,
    from_wildchat_row,
    iter_wildchat_rows,
    read_wildchat,
    to_wildchat_row,
    write_wildchat,
)

__all__ = [
    "Conversation",
    "Turn",
    "WildChatFormatError",
    "conversation_features",
    "format_timestamp",
    "from_wildchat_row",
    "generate_wildchat_sample",
    "iter_wildchat_rows",
    "make_user_id",
    "parse_timestamp",
    "read_wildchat",
    "scrub_conversation",
    "scrub_conversation_with_counts",
    "scrub_pii",
    "scrub_pii_counts",
    "scrub_pii_with_counts",
    "to_wildchat_row",
    "write_wildchat",
]
