"""WildChat-AQA (aggregative question answering): chunking, the pre-filtered retrieval index, the answerers
and their evaluation.

See ``../shared/specs/wildchat_aqa.md`` for the system. :mod:`convohub.aqa.retrieval` says why the index is
built the way it is; :mod:`convohub.aqa.methods` lists the methods and answerers; :mod:`convohub.aqa.context`
how RAG, PROBE and the oracle fill the context; :mod:`convohub.aqa.evaluation` runs and measures them.
"""

from convohub.aqa.answers import parse_ranking
from convohub.aqa.chunking import Chunk, chunk_text, render_conversation
from convohub.aqa.evaluation import AQARunner, Setting, format_results
from convohub.aqa.methods import ANSWERERS, METHODS, Answer
from convohub.aqa.questions import Question, load_questions
from convohub.aqa.retrieval import Document, Filters, Hit, RetrievalIndex, conversation_documents, pool_hits

__all__ = [
    "ANSWERERS",
    "AQARunner",
    "Answer",
    "Chunk",
    "Document",
    "Filters",
    "Hit",
    "METHODS",
    "Question",
    "RetrievalIndex",
    "Setting",
    "chunk_text",
    "conversation_documents",
    "format_results",
    "load_questions",
    "parse_ranking",
    "pool_hits",
    "render_conversation",
]
