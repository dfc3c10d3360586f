"""The prompts of ProMISe's LLM steps and the checks their answers must pass.

Written for a model as small as SmolLM2-135M-Instruct (the offline LLM): one short output per call, a
worked example as an earlier chat exchange, a fixed reply format, and a parser that validates instead of
trusting. The structure follows the paper's appendix (Tables 6, 8, 9, 11); the wording is convohub's.

* intent (Table 8): topic -> what the user wants to find out, with one or two preferences (price, place,
  quantity, use);
* initial question (Table 9): topic + intent -> a very short first question (at most ten words) on the topic,
  without the intent's preferences: the dialogue's suggestions are there to bring those. Asked to keep the
  specifics, SmolLM2 restated the whole intent (on average 66% of its content words), and the user was
  satisfied after one suggestion in 14 of 15 dialogues (mean 2.07 turns; the paper's 4.35);
* suggested question and answer (Table 6), one per call and per snippet: the current query, the snippet,
  and earlier turns of the dialogue as in-context examples ("Sample query / Sample question / Sample
  answer") as far as a token budget allows. The question must be a question, new in the dialogue and
  related to the snippet; the answer must be grounded in it (most of its content words occur in the snippet);
* answer-first suggestion (what SmolLM2 can do): the answer is the snippet sentence closest to the query and
  the model writes the question it answers, after two worked examples of seven whose questions open differently
  (another two for each suggestion slot of a turn, :func:`qg_examples`) and earlier turns' (answer, question)
  pairs within the budget; the question passes the same checks;
* the user's action (Table 11 without the explanation): intent, questions asked so far, the four suggested
  questions -> ``1``..``4``, ``none`` or ``done``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TypeVar

from convohub.llm import ChatRequest

T = TypeVar("T")

# ------------------------------------------------------------------------------------------------ words
_WORD = re.compile(r"[a-z0-9$]+(?:[.,'\-][a-z0-9]+)*")
_STOPWORDS = """a about above after again all also am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further had has have having
he her here hers him his how i if in into is it its itself just me more most my no nor not now of off on once
only or other our out over own same she should so some such than that the their them then there these they this
those through to too under until up very was we were what when where which while who whom why will with would
you your yours want wants need needs like know find get one also much many tell give way"""
STOPWORDS = frozenset(_STOPWORDS.split())


def normalise(word: str) -> str:
    """A crude English stem (plural -s/-es, -ing, -ed dropped), so "drones" meets "drone"."""
    for suffix, keep in (("ies", "y"), ("sses", "ss"), ("es", ""), ("s", ""), ("ing", ""), ("ed", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            return word[: -len(suffix)] + keep
    return word


def content_words(text: str) -> set[str]:
    """Lower-cased, stemmed words of ``text`` that are not stopwords (numbers included)."""
    return {normalise(w.replace("-", "")) for w in _WORD.findall(text.lower()) if w not in STOPWORDS}


def estimate_tokens(text: str) -> int:
    """A backend-free token estimate for context budgets: 4 tokens per 3 words."""
    return (4 * len(text.split()) + 2) // 3


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.strip().splitlines() if line.strip()), "")


def _strip_label(line: str, *labels: str) -> str:
    pattern = r"^\s*(?:" + "|".join(labels) + r")\s*\d*\s*[:.)-]\s*"
    return re.sub(pattern, "", line, flags=re.I).strip().strip('"').strip()


# ------------------------------------------------------------------------------------------------ intent
#: worked examples (topic, intent, first question), on topics outside convohub's passage collection
EXAMPLES = (
    ("waterproof hiking boots", "I want to buy waterproof hiking boots for a mountain trip next month. They should be "
     "light and cost less than $120.", "Which hiking boots are waterproof?"),
    ("pizza dough at home", "I want to make pizza dough at home for four people tonight, in a small oven and "
     "without yeast.", "How do I make pizza dough?"),
)


def _shots(user: str, assistant: str) -> list[dict[str, str]]:
    out = []
    for topic, intent, question in EXAMPLES:
        out += [{"role": "user", "content": user.format(topic=topic, intent=intent)},
                {"role": "assistant", "content": assistant.format(intent=intent, question=question)}]
    return out


def intent_request(topic: str, seed: int | None = None, temperature: float = 0.0) -> ChatRequest:
    """Topic -> intent with preferences (the paper's Table 8, two worked examples)."""
    instruction = ("Turn the topic into what a user wants to find out. Use the topic's words and add one or two "
                   "preferences such as price, place, quantity or use. Reply with two short sentences.")
    return ChatRequest(messages=[{"role": "system", "content": instruction},
                                 *_shots("Topic: {topic}", "Intent: {intent}"),
                                 {"role": "user", "content": f"Topic: {topic}"}],
                       max_new_tokens=48, temperature=temperature, seed=seed)


def parse_intent(text: str, topic: str) -> str:
    """The intent: 6-60 words, mentioning a word of the topic, repeating no three-word sequence (SmolLM2 loops,
    e.g. "a drone camera with a drone camera"); raises ValueError otherwise."""
    intent = _strip_label(" ".join(text.strip().split("\n\n")[0].split()), "intent")
    words = intent.split()
    if not 6 <= len(words) <= 60:
        raise ValueError(f"intent has {len(words)} words (6-60 expected): {intent[:80]!r}")
    if not content_words(intent) & content_words(topic):
        raise ValueError(f"intent does not mention the topic {topic!r}: {intent[:80]!r}")
    lowered = [w.strip(".,!?").lower() for w in words]
    trigrams = [tuple(lowered[k:k + 3]) for k in range(len(lowered) - 2)]
    if len(set(trigrams)) < len(trigrams):
        raise ValueError(f"intent repeats itself: {intent[:80]!r}")
    if intent[-1] not in ".!?":
        intent = intent.rsplit(".", 1)[0] + "." if "." in intent else intent + "."
    return intent


def question_request(topic: str, intent: str, seed: int | None = None, temperature: float = 0.0) -> ChatRequest:
    """Topic + intent -> a very short initial question on the topic, without the preferences (Table 9, two
    worked examples)."""
    instruction = ("Turn the topic and the intent into the very short question a user would type first: the "
                   "topic only, at most eight words, without the intent's preferences. Reply with the question only.")
    return ChatRequest(messages=[{"role": "system", "content": instruction},
                                 *_shots("Topic: {topic}\nIntent: {intent}", "Question: {question}"),
                                 {"role": "user", "content": f"Topic: {topic}\nIntent: {intent}"}],
                       max_new_tokens=24, temperature=temperature, seed=seed)


def parse_question(text: str, topic: str) -> str:
    """A very short question (3-10 words, ending in '?') sharing a word with the topic."""
    question = _strip_label(_first_line(text), "question", "query")
    if "?" in question:
        question = question[: question.index("?") + 1]
    if not question.endswith("?"):
        raise ValueError(f"not a question: {question[:80]!r}")
    if not 3 <= len(question.split()) <= 10:
        raise ValueError(f"question has {len(question.split())} words (3-10 expected): {question[:80]!r}")
    if not content_words(question) & content_words(topic):
        raise ValueError(f"question does not mention the topic {topic!r}: {question[:80]!r}")
    return question


# ------------------------------------------------------------------------------------------------ SQAs
SQA_EXAMPLE = ("Hiking boots with a waterproof membrane keep feet dry in rain and shallow streams. They are heavier "
               "than trail shoes and cost from about $90 to $200.", "waterproof hiking boots",
               "How much do waterproof hiking boots cost?",
               "They are heavier than trail shoes and cost from about $90 to $200.")
SQA_INSTRUCTION = ("You suggest the next question a search user could ask about their query, one that the passage "
                   "answers, and give its answer copied from the passage. Reply as 'Question: ...' then "
                   "'Answer: ...'.")


def sample_block(query: str, qas: Sequence[tuple[str, str]]) -> str:
    """One earlier turn as an in-context example, in the paper's "Sample query / question / answer" layout."""
    lines = [f"Sample query: {query}"]
    for k, (question, answer) in enumerate(qas, start=1):
        lines += [f"Sample question {k}: {question}", f"Sample answer {k}: {answer}"]
    return "\n".join(lines)


def fit_recent(items: Sequence[T], cost: Callable[[T], int], budget_tokens: int) -> list[T]:
    """As many of the most recent ``items`` (sample blocks, or (answer, question) pairs) as fit
    ``budget_tokens`` by their estimated ``cost``, oldest first."""
    kept: list[T] = []
    used = 0
    for item in reversed(items):
        used += cost(item)
        if used > budget_tokens:
            break
        kept.insert(0, item)
    return kept


QG_INSTRUCTION = "Write the question that the sentence answers. Reply as 'Question: ...'."
#: worked examples of the answer-first prompt (sentence, question), on topics outside the passage collection, each
#: question opening differently: SmolLM2 copies the opening of the examples it is shown (shown the same two every
#: time, the last opening "How long does", it began 45% of a tiny build's 568 suggestions that way; shown two of
#: these seven, another two per suggestion slot, 13.5% of 556)
QG_EXAMPLES = (("Hiking boots with a leather upper cost from about $90 to $200.",
                "How much do leather hiking boots cost?"),
               ("Pizza dough needs about one hour to rise in a warm kitchen.", "How long does pizza dough take to rise?"),
               ("A cast-iron pan rusts when it is left wet, so dry it right after washing.",
                "Why should a cast-iron pan be dried right after washing?"),
               ("Road bike tyres are usually pumped to between 80 and 100 psi.",
                "What pressure should road bike tyres have?"),
               ("A three-season tent weighs under two kilos and keeps out spring rain.",
                "Which tent suits summer hikes?"),
               ("Chess clubs often meet on weekday evenings at the local library.",
                "Where do chess clubs usually meet?"),
               ("Espresso beans work in a drip coffee maker when they are ground medium.",
                "Can espresso beans be used in a drip coffee maker?"))
#: worked examples shown per request: consecutive ones of :data:`QG_EXAMPLES` from the request's ``start``
#: (:func:`qg_examples`), so the prompt stays as short as with a fixed pair
QG_SHOWN = 2


def qg_examples(start: int) -> tuple[tuple[str, str], ...]:
    """The :data:`QG_SHOWN` worked examples from ``start`` on (cyclically). The simulation loop starts each of a
    turn's four suggestion slots at another one, shifted every turn, so a turn's suggestions are asked after
    different examples while the prompts of one slot share them (and a batch runs them once,
    :func:`convohub.llm.local.plan_batches`)."""
    return tuple(QG_EXAMPLES[(start + k) % len(QG_EXAMPLES)] for k in range(QG_SHOWN))


#: how the agent's answers are written: by the LLM with the question (the paper), or first, as the snippet sentence
#: closest to the query, with the LLM writing the question that sentence answers (``extractive``)
ANSWER_MODES = ("llm", "extractive")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9$])")


def answer_sentence(query: str, snippet: str, used: Sequence[str] = ()) -> str:
    """The snippet sentence sharing the most content words with the query (the first on a tie), among those
    not ``used`` yet as an answer in the dialogue (all of them when every one was)."""
    sentences = [x.strip() for x in _SENTENCE.split(snippet.strip()) if x.strip()] or [snippet.strip()]
    fresh = [x for x in sentences if x not in set(used)] or sentences
    wanted = content_words(query)
    return max(fresh, key=lambda x: (len(content_words(x) & wanted), -fresh.index(x)))


def qg_request(answer: str, examples: Sequence[tuple[str, str]] = (), *, start: int = 0, seed: int | None = None,
               temperature: float = 0.0) -> ChatRequest:
    """The question a snippet sentence answers (answer-first suggestion), after the worked examples
    :func:`qg_examples` gives for ``start``; ``examples`` are earlier turns' (answer, question) pairs, shown as
    further worked examples after those."""
    messages = [{"role": "system", "content": QG_INSTRUCTION}]
    for sentence, question in (*qg_examples(start), *examples):
        messages += [{"role": "user", "content": f"Sentence: {sentence}"},
                     {"role": "assistant", "content": f"Question: {question}"}]
    messages.append({"role": "user", "content": f"Sentence: {answer}"})
    return ChatRequest(messages=messages, max_new_tokens=24, temperature=temperature, seed=seed)


def sqa_request(query: str, snippet: str, examples: Sequence[str] = (), *, seed: int | None = None,
                temperature: float = 0.0, max_new_tokens: int = 48) -> ChatRequest:
    """One suggested question with its answer for ``query``, grounded in ``snippet`` (Table 6, one SQA per
    call; ``examples``: earlier turns as sample blocks)."""
    context = ("Earlier turns of this conversation:\n" + "\n\n".join(examples) + "\n\n") if examples else ""
    return ChatRequest(messages=[
        {"role": "system", "content": SQA_INSTRUCTION},
        {"role": "user", "content": f"Passage: {SQA_EXAMPLE[0]}\nQuery: {SQA_EXAMPLE[1]}"},
        {"role": "assistant", "content": f"Question: {SQA_EXAMPLE[2]}\nAnswer: {SQA_EXAMPLE[3]}"},
        {"role": "user", "content": f"{context}Passage: {snippet}\nQuery: {query}"}],
        max_new_tokens=max_new_tokens, temperature=temperature, seed=seed)


#: share of an answer's content words that must occur in its snippet
GROUNDING = 0.6


class RepeatedQuestion(ValueError):
    """A suggested question with the same content words as an earlier query or suggestion of its dialogue."""


def parse_sqa(text: str, snippet: str, seen: Sequence[str] = (), answer: str | None = None) -> tuple[str, str]:
    """(question, answer) of an SQA reply, or ValueError naming the failed check: a question of 3-25 words
    ending in '?', not a repeat of ``seen`` (earlier queries and SQs; a repeat raises :class:`RepeatedQuestion`,
    which the loop answers by asking again without the dialogue's earlier turns), sharing a word with the snippet; an
    answer of 2-50 words with at least :data:`GROUNDING` of its content words in the snippet, unless the
    ``answer`` was given (answer-first: the snippet sentence the question was asked for)."""
    given = answer
    question = answer = ""
    for line in text.strip().splitlines():
        if re.match(r"^\s*(?:sample\s+)?question\s*\d*\s*:", line, re.I) and not question:
            question = _strip_label(line, "sample question", "question")
        elif re.match(r"^\s*(?:sample\s+)?answer\s*\d*\s*:", line, re.I) and question and not answer:
            answer = _strip_label(line, "sample answer", "answer")
    if not question and given is not None and _first_line(text).endswith("?"):
        question = _first_line(text)  # a bare question is a reply too
    if not question:
        raise ValueError(f"no 'Question:' line in {text.strip()[:80]!r}")
    if "?" in question:
        question = question[: question.index("?") + 1]
    if not question.endswith("?") or not 3 <= len(question.split()) <= 25:
        raise ValueError(f"not a question of 3-25 words: {question[:80]!r}")
    key = " ".join(sorted(content_words(question)))
    if any(key == " ".join(sorted(content_words(s))) for s in seen):
        raise RepeatedQuestion(f"repeats an earlier question: {question[:80]!r}")
    snippet_words = content_words(snippet)
    if not content_words(question) & snippet_words:
        raise ValueError(f"question shares no word with its snippet: {question[:80]!r}")
    if given is not None:
        return question, given
    if not answer:
        raise ValueError(f"no 'Answer:' line after the question in {text.strip()[:80]!r}")
    words = content_words(answer)
    if not 2 <= len(answer.split()) <= 50 or not words:
        raise ValueError(f"answer of {len(answer.split())} words (2-50 expected): {answer[:80]!r}")
    grounded = len(words & snippet_words) / len(words)
    if grounded < GROUNDING:
        raise ValueError(f"answer not grounded in its snippet ({grounded:.0%} of its words there, "
                         f"{GROUNDING:.0%} needed): {answer[:80]!r}")
    return question, answer


# ------------------------------------------------------------------------------------------------ user
USER_INSTRUCTION = ("You are a user with an intent. You have asked some questions, and a search assistant suggests "
                    "four more. If the questions asked so far already cover the intent, reply done. Otherwise reply "
                    "with the number of the suggested question that helps most with the intent, or none if no "
                    "suggested question helps. Reply with one word: 1, 2, 3, 4, none or done.")


def user_prompt(intent: str, asked: Sequence[str], candidates: Sequence[str]) -> str:
    """The user message of the action prompt (Table 11's fields, without the explanation)."""
    return (f"Intent: {intent}\nQuestions asked so far:\n" + "\n".join(f"- {q}" for q in asked)
            + "\nSuggested questions:\n" + "\n".join(f"{k}. {q}" for k, q in enumerate(candidates, start=1))
            + "\nYour choice (1, 2, 3, 4, none or done):")


def user_request(intent: str, asked: Sequence[str], candidates: Sequence[str], *, seed: int | None = None,
                 temperature: float = 0.0) -> ChatRequest:
    """The user's action at one turn (Table 11 without the explanation)."""
    return ChatRequest(messages=[{"role": "system", "content": USER_INSTRUCTION},
                                 {"role": "user", "content": user_prompt(intent, asked, candidates)}],
                       max_new_tokens=6, temperature=temperature, seed=seed)


def parse_action(text: str) -> str | None:
    """``sq1``..``sq4``, ``none`` or ``done`` from a reply ("2", "choice 3", "None.", "Done"), else None."""
    match = re.search(r"\b(?:choice\s*|question\s*|sq\s*)?([1-4])\b|\b(none|done)\b", text.strip().lower())
    if match is None:
        return None
    return f"sq{match.group(1)}" if match.group(1) else match.group(2)


def completion_text(action: str) -> str:
    """What a generative simulator is trained to reply for ``action`` (inverse of :func:`parse_action`)."""
    return action[2:] if action.startswith("sq") else action

