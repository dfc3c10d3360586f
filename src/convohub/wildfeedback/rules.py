"""The offline stand-in for the SPUR labelling call: a transparent lexicon/rule labeller.

It fills exactly the fields and enums the LLM fills, so everything downstream runs unchanged offline.
Rules, per user turn T-k (k >= 2; T-1 has no previous AI response, so no feedback labels):

* satisfaction -- cue phrases (several languages) per label: Gratitude (thanks, merci, danke, gracias,
  obrigado, vielen dank, спасибо, 谢谢, 多谢; not "thanks in advance"), Praise (great, perfect, awesome, lifesaver, exactly
  what I needed, ...), Compliance (it works / fixed it), Acknowledgment (makes sense, got it, I see),
  Learning (interesting, I didn't know), Getting_There (better, but / almost / closer); Positive_Closure
  when the *last* user turn has a SAT label and asks nothing. Humor, Personal_Details: never (no reliable
  surface cue).
* dissatisfaction -- Factual_Error (wrong, incorrect, not right, mistake, outdated, mixed up, falsch,
  faux, errado, неправильно, 不对, 错了, ...; not inside a plain question such as "What's wrong with my
  code?", and not 不错 / 没错, which mean "not bad" / "right"), Ignored (didn't answer, not what I asked, misunderstood),
  Negative_Feedback (useless, stupid, terrible, not what I asked), Style (shorter/longer/simpler/more
  formal/bullet points/casual, and their translations; also adds Revision), Revision (rewrite, rephrase,
  try again, check your answer, fix), Insufficient_Detail (more detail, example, elaborate, be more
  specific), Lower_Quality (other assistants / "you used to"). Unrealistic_Expectation, No_Engagement:
  never.
* state -- FEEDBACK when a SAT label or an evaluative DSAT label (everything but pure Revision / Style /
  Insufficient_Detail requests) is present; REFINEMENT for pure revision requests; NEWTOPIC for T-1 or
  when the turn shares no content word (4+ letters, not a stop word) with the previous exchange and either
  its domain cue differs or it has 3+ content words of its own; CONTINUATION otherwise. preceding_topical_relation is NO exactly for NEWTOPIC.
* domain -- a keyword lexicon over ~20 of the 50 domains; a related turn (YES) keeps the previous domain,
  an unmatched new topic is OTHER. intent -- CREATION (write, create, translate, make a ...), ANALYSIS
  (why, compare, explain, difference), INFORMATION_SEEKING (other questions), OPEN-ENDED_DISCOVERY
  (none); feedback turns inherit the previous intent.
* summary -- one sentence: what kind of turn it is plus the first 160 characters of the utterance.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from convohub.wildfeedback.labels import NA, TurnLabel

LABELLER_NAME = "rules:lexicon-v2"


def _rx(*phrases: str) -> re.Pattern[str]:
    """Word-bounded (for Latin scripts) alternation of cue phrases, case-insensitive."""
    parts = []
    for phrase in phrases:
        body = re.escape(phrase).replace(r"\ ", r"\s+")
        latin = re.match(r"[a-zà-ÿ]", phrase, re.I) is not None
        parts.append(rf"(?<!\w){body}(?:s|es)?(?!\w)" if latin else body)
    return re.compile("|".join(parts), re.IGNORECASE)


SAT_CUES: dict[str, re.Pattern[str]] = {
    "Gratitude": _rx("thank you", "thanks", "thx", "ty", "much appreciated", "merci", "danke", "dank", "gracias",
                     "obrigado", "obrigada", "спасибо", "谢谢", "多谢", "感谢"),
    "Praise": _rx("great", "perfect", "perfectly", "awesome", "excellent", "amazing", "wonderful", "brilliant",
                  "lifesaver", "exactly what i needed", "really helpful", "very helpful", "love it", "nice",
                  "super", "génial", "genial", "ótimo", "perfeitamente", "parfaitement", "perfekt", "perfectamente",
                  "отлично", "супер", "太好了", "完全可以", "不错", ":)", "😊", "👍"),
    "Compliance": _rx("that works", "it works", "it worked", "that worked", "fixed it", "works now", "funktioniert",
                      "ça marche", "funciona", "funcionou", "работает"),
    "Acknowledgment": _rx("makes sense", "got it", "oh i see", "ah i see", "i see now", "understood", "that clears it up"),
    "Learning": _rx("interesting", "i didn't know", "i did not know", "today i learned", "good to know"),
    "Getting_There": _rx("better, but", "better but", "almost", "closer", "getting there", "much better"),
}
_NOT_GRATITUDE = _rx("thanks in advance", "thank you in advance")
DSAT_CUES: dict[str, re.Pattern[str]] = {
    "Factual_Error": _rx("wrong", "incorrect", "not correct", "not right", "isn't right", "outdated",
                         "mixed up", "you're confusing", "you are confusing", "doesn't exist", "does not exist",
                         "not true", "that's false", "made a mistake", "sign error", "falsch", "faux", "está mal", "errado", "неправильно",
                         "不对", "错了", "说错", "搞错", "弄错", "算错", "写错", "有错误", "是错的"),
    "Ignored": _rx("didn't answer", "did not answer", "not what i asked", "you misunderstood", "ignored",
                   "you didn't read", "that's not my question"),
    "Negative_Feedback": _rx("useless", "stupid", "terrible", "awful", "garbage", "nonsense", "annoying",
                             "frustrating", "not helpful", "unhelpful", "not what i asked"),
    "Style": _rx("shorter", "more concise", "longer", "simpler", "more formal", "less formal", "more casual",
                 "bullet points", "bullet list", "as a table", "more enthusiastic", "kürzer", "plus court",
                 "más corto", "mais curto", "покороче", "短一点"),
    "Revision": _rx("rewrite", "rephrase", "revise", "try again", "check your answer", "redo", "fix it",
                    "please fix", "make it", "überprüfe", "vérifie", "revisa", "confira", "проверь",
                    "再检查"),
    "Insufficient_Detail": _rx("more detail", "more details", "more specific", "elaborate", "give me an example",
                               "an example", "expand on", "ausführlicher", "plus de détails", "más detalles",
                               "mais detalhes", "подробнее", "详细"),
    "Lower_Quality": _rx("chatgpt did better", "other ai", "you used to", "worse than before", "gpt-4 did"),
}
_REQUEST_ONLY = {"Revision", "Style", "Insufficient_Detail"}
#: Complaint labels whose cue words ("wrong", "useless", "ignored") also occur in plain questions about the
#: user's own material: "What's wrong with my code?" asks for help, it does not say the AI erred.
_COMPLAINTS = ("Factual_Error", "Negative_Feedback", "Ignored")
_SENTENCE = re.compile(r"[^.!?。！？]+[.!?。！？]*")
_WH_QUESTION = re.compile(r"^\W*(what|what's|whats|why|how|where|which|who|when|is there|can|could|do|does)\b",
                          re.IGNORECASE)
_ABOUT_AI = re.compile(r"(?<!\w)(you|your|you're|answer|response|reply)(?!\w)", re.IGNORECASE)
#: "对不对" (right or not?) contains 不对; a question, not a correction.
_ZH_QUESTION = re.compile(r"对不对|是不是")

DOMAIN_CUES: dict[str, re.Pattern[str]] = {
    "SOFTWARE AND WEB DEVELOPMENT": _rx("code", "function", "python", "javascript", "java", "rust", "sql",
                                        "typescript", "c++", "compile", "bug", "loop", "csv", "programming"),
    "COOKING FOOD AND DRINKS": _rx("recipe", "bake", "cook", "ingredient", "flour", "butter", "vegetarian",
                                   "grams", "dish", "food"),
    "TRAVEL": _rx("trip", "travel", "visit", "airport", "hotel", "museum", "itinerary", "places to stay"),
    "GEOGRAPHY AND GEOLOGY": _rx("capital", "country", "continent", "river", "mountain"),
    "WRITING JOURNALISM AND PUBLISHING": _rx("cover letter", "essay", "poem", "email", "write", "rewrite",
                                             "story", "paragraph", "title", "sentence", "blog"),
    "MATH LOGIC AND STATISTICS": _rx("math", "equation", "derivative", "integral", "probability", "times",
                                     "calculate", "algebra", "theorem"),
    "HEALTH AND MEDICINE": _rx("health", "doctor", "vitamin", "diet", "symptom", "sleep", "exercise", "risks"),
    "FINANCE AND ECONOMICS": _rx("invest", "interest", "tax", "budget", "stock", "savings", "loan", "inflation",
                                 "$"),
    "GAMES": _rx("game", "boss", "mods", "level", "quest", "minecraft", "zelda", "elden ring"),
    "MUSIC AND AUDIO": _rx("song", "album", "playlist", "music", "band", "singer"),
    "ENTERTAINMENT": _rx("film", "movie", "anime", "series", "episode", "spoiler", "directed", "watching"),
    "PHYSICS CHEMISTRY AND ASTRONOMY": _rx("physics", "chemistry", "quantum", "gravity", "photosynthesis",
                                           "black hole", "atom", "experiment"),
    "CAREER AND JOB APPLICATION": _rx("job", "interview", "salary", "resume", "career", "certification"),
    "CULTURE AND HISTORY": _rx("history", "historical", "century", "war", "empire", "born", "famous quotes"),
}
_CREATION = _rx("write", "create", "generate", "compose", "draft", "translate", "make a", "give it a",
                "playlist", "rewrite")
_ANALYSIS = _rx("why", "compare", "explain", "difference", "analyse", "analyze", "how does", "pros and cons",
                "complexity", "implications")
_QUESTION = re.compile(r"\?|^(what|how|who|when|where|which|is|are|can|could|do|does)\b", re.IGNORECASE)
_WORD = re.compile(r"[^\W\d_]{4,}", re.UNICODE)
_STOP = frozenset(["that", "this", "with", "what", "have", "your", "about", "from", "they", "them", "then", "there", "these", "those", "would", "could", "should", "which", "when", "where", "thanks", "thank", "please", "make", "more", "also", "just", "like", "some", "into"])


def _cues(text: str, table: Mapping[str, re.Pattern[str]]) -> list[str]:
    return [label for label, pattern in table.items() if pattern.search(text)]


def _is_plain_question(sentence: str) -> bool:
    """A wh-/yes-no question that does not talk about the AI or its answer."""
    s = sentence.strip()
    if _ZH_QUESTION.search(s):
        return True
    return s.endswith("?") and _WH_QUESTION.search(s) is not None and _ABOUT_AI.search(s) is None


def _dsat_cues(text: str) -> list[str]:
    """DSAT cue labels; complaint cues count only outside plain questions (see :data:`_COMPLAINTS`)."""
    found = _cues(text, DSAT_CUES)
    kept = []
    for label in found:
        if label in _COMPLAINTS and not any(DSAT_CUES[label].search(s) and not _is_plain_question(s)
                                            for s in _SENTENCE.findall(text)):
            continue
        kept.append(label)
    return kept


def _domain(text: str) -> str | None:
    hits = [(len(p.findall(text)), d) for d, p in DOMAIN_CUES.items() if p.search(text)]
    return max(hits)[1] if hits else None


def _intent(text: str) -> str | None:
    if _CREATION.search(text):
        return "INTENT:3-CREATION"
    if _ANALYSIS.search(text):
        return "INTENT:2-ANALYSIS"
    if _QUESTION.search(text.strip()):
        return "INTENT:1-INFORMATION_SEEKING"
    return None


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)} - _STOP


def _summary(text: str, state: str, sat: bool, dsat: bool) -> str:
    kind = ("The user gives negative feedback on the previous answer" if dsat and state == "FEEDBACK" else
            "The user asks for a revision of the previous answer" if state == "REFINEMENT" else
            "The user reacts positively to the previous answer" if sat else
            "The user starts a new request" if state == "NEWTOPIC" else "The user continues the conversation")
    snippet = " ".join(text.split())
    snippet = snippet if len(snippet) <= 160 else snippet[:157].rstrip() + "..."
    return f'{kind}: "{snippet}"'


def label_turns(turns: Sequence[Mapping[str, str]],
                feedback: Sequence[tuple[Sequence[str], Sequence[str]]] | None = None) -> list[TurnLabel]:
    """Rule labels for every user turn of ``turns`` (``[{"role", "content"}, ...]``), in order.

    ``feedback`` (one ``(satisfaction, dissatisfaction)`` pair per user turn) replaces the cue lexicon for
    the feedback labels -- the split-prompt labeller passes a model's labels here -- and the remaining
    fields (state, relation, domain, intent, summary) are derived around them by the same rules.
    """
    if feedback is not None and len(feedback) != sum(t["role"] == "user" for t in turns):
        raise ValueError(f"{len(feedback)} feedback label pairs for "
                         f"{sum(t['role'] == 'user' for t in turns)} user turns")
    out: list[TurnLabel] = []
    previous_user = previous_ai = ""
    user_positions = [i for i, t in enumerate(turns) if t["role"] == "user"]
    for k, pos in enumerate(user_positions):
        text = turns[pos]["content"]
        is_last = k == len(user_positions) - 1
        sat: list[str] = []
        dsat: list[str] = []
        if k > 0 and feedback is not None:
            sat = [x for x in feedback[k][0] if x != NA]
            dsat = [x for x in feedback[k][1] if x != NA]
        elif k > 0:
            sat = _cues(text, SAT_CUES)
            if "Gratitude" in sat and _NOT_GRATITUDE.search(text) and len(_NOT_GRATITUDE.findall(text)) == len(
                    SAT_CUES["Gratitude"].findall(text)):
                sat.remove("Gratitude")
            dsat = _dsat_cues(text)
            if "Style" in dsat and "Revision" not in dsat:
                dsat.append("Revision")
            if dsat and "Getting_There" not in sat:
                # "Thanks, but that's wrong": politeness around a complaint is not satisfaction
                sat = [s for s in sat if s not in ("Praise", "Compliance", "Acknowledgment", "Learning")]
            if sat and is_last and "?" not in text and not dsat:
                sat.append("Positive_Closure")
        own_domain = _domain(text)
        shared = _words(text) & _words(previous_user + " " + previous_ai)
        evaluative = bool(sat) or any(d not in _REQUEST_ONLY for d in dsat)
        if k == 0:
            state = "NEWTOPIC"
        elif evaluative:
            state = "FEEDBACK"
        elif dsat:
            state = "REFINEMENT"
        elif not shared and out and ((own_domain is not None and own_domain != out[-1].domain)
                                     or len(_words(text)) >= 3):
            state = "NEWTOPIC"
        else:
            state = "CONTINUATION"
        related = state != "NEWTOPIC"
        domain = out[-1].domain if related and out else (own_domain or "OTHER")
        intent = _intent(text)
        if intent is None or (related and state in ("FEEDBACK", "REFINEMENT") and out):
            intent = out[-1].intent if related and out else (intent or "INTENT:4-OPEN-ENDED_DISCOVERY")
        out.append(TurnLabel(
            summary=_summary(text, state, bool(sat), bool(dsat)),
            preceding_topical_relation="YES" if related else "NO",
            domain=domain, intent=intent,
            satisfaction=sat or [NA], dissatisfaction=dsat or [NA], state=state,
        ))
        previous_user = text
        nxt = pos + 1
        previous_ai = turns[nxt]["content"] if nxt < len(turns) and turns[nxt]["role"] == "assistant" else ""
    return out
