"""WildChat-AQA (aggregative question answering): chunking, the pre-filtered retrieval index, answer parsing.

See ``../shared/specs/wildchat_aqa.md`` for the system; :mod:`convohub.aqa.retrieval` says why the index
is built the way it is.
"""

from convohub.aqa.answers import parse_ranking
from convohub.aqa.chunking import Chunk, chunk_text, render_conversation
from convohub.aqa.retrieval import Document, Filters, Hit, RetrievalIndex, conversation_documents, pool_hits

__all__ = [
    "Chunk",
    "Document",
    "Filters",
    "Hit",
    "RetrievalIndex",
    "chunk_text",
    "conversation_documents",
    "parse_ranking",
    "pool_hits",
    "render_conversation",
]
