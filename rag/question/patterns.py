"""What a question asks: a list of papers, a quantity, a paper's metadata, a summary."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Container

from rag.corpus.acronyms import acronym_pattern, is_acronym, long_forms, singular
from rag.corpus.paper import Paper
from rag.corpus.text import short_label
from rag.corpus.words import content_words

_LIST_Q = re.compile(
    r"^\s*(?:which|what|list|name|find|show|are there|give me)\b.{0,40}?\b"
    r"(?:papers|systems|works|methods|approaches|frameworks|abstracts|studies|tools|"
    r"techniques|ones)\b", re.I,
)
_LIST_LEAD = re.compile(
    _LIST_Q.pattern + r"\s*(?:(?:are|is|that|which|do|does|in the corpus|here)\s+)*"
    r"(?:\w+\s+(?:on|about|with|to|for)\s+)?", re.I,
)
FOLLOW_UP = re.compile(r"\b(it|its|it's|they|them|their|this|that|these|those|he|she|the same)\b", re.I)
# "What about GPipe?", "And for ByteScheduler?", "How about Horovod?": the question before, asked of
# another paper.
ANOTHER = re.compile(r"^\W*(?:and\s+)?(?:what|how)\s+about\b|^\W*and\s+(?:for|in|with)?\b", re.I)
BY_AUTHOR = re.compile(r"\b(write|writes|wrote|written|authors?|authored|by)\b", re.I)
_WHO_MADE = r"who (?:wrote|authored|developed|created|proposed|introduced|designed|built|invented)"
META = re.compile(
    rf"\b(arxiv(?:\s+id)?|doi|authors?|{_WHO_MADE}|written by|venue|published|journal|conference|"
    r"what year|which year|when was)\b", re.I,
)
# "Who wrote TinyBERT?", "Who developed Horovod?": a question for a paper's authors.
WHO_WROTE = re.compile(rf"\b{_WHO_MADE}\b|\bauthors? of\b|\bwritten by\b", re.I)
ARXIV_ID = re.compile(r"\b(\d{4}\.\d{4,5})\b")
# "When was GPipe published?" asks the record for a date; "When does GPipe split batches?"
# does not, though RECORD_ASKS counts any "when" (there the record's date only has to be there).
ASKS_DATE = re.compile(r"\b(?:what|which) year\b|\bdated?\b|\bcreated\b|\bwhen (?:was|were|did)\b"
                        r".*\b(?:publish|appear|release|submit|post|creat|writ|present)", re.I)

# "Who wrote GPipe?" asks the record for authors; "Who funded GPipe?" does not, though
# RECORD_ASKS counts any "who".
ASKS_AUTHORS = re.compile(WHO_WROTE.pattern + r"|\b(?:co-?)?authors?\b|\bauthored\b", re.I)

QUESTION_STOP = content_words(
    "which what papers systems works methods approaches frameworks abstracts studies tools "
    "does do did paper system target targets about any report reports how much many"
)
# Words that ask nothing in particular: "What does X do?" asks for a summary of X.
GENERIC = content_words(
    "what does do did work works working purpose goal goals main idea ideas about propose "
    "proposes proposed offer offers contribution contributions tell me describe summary summarise "
    "summarize explain overview key point points is are was were it its optimise optimize "
    "optimises optimizes solve solves address addresses tackle tackles aim aims achieve "
    "achieves improve improves problem problems challenge challenges"  # "What problem does X solve?"
) | QUESTION_STOP


def without_names(question: str, names: list[str]) -> str:
    """The question with these paper names taken out: what it asks about them."""
    for name in names:
        question = re.sub(rf"(?i)(?<![\w-]){re.escape(name)}(?![\w-])", " ", question)
    return question


# "What does LoRA stand for?": the question asks for a name's long form.
EXPANSION = re.compile(r"\b(?:stands?|stood) for\b|\bshort for\b|\babbreviat|\bacronym\b|"
                       r"\bfull (?:name|form)\b|\blong form\b", re.I)
# "How does vLLM compare with Horovod?": the question sets one system against another.
COMPARES = re.compile(r"\bcompar(?:e|es|ed|ing|ison)\b|\bversus\b|\bvs\.?(?!\w)|\bagainst\b|"
                      r"\brelative to\b|\b(?:better|worse|faster|slower) than\b|"
                      r"\boutperform|\bbeat", re.I)
# Words of a question about an author's papers that ask nothing of the papers' topic.
_AUTHOR_ASKS = content_words(
    "co-author co-authored co-wrote coauthor coauthored author authors authored write writes "
    "wrote written by collection corpus library index here have has") | GENERIC


# Words by which a "which papers" question relates papers to a named thing, asking nothing
# else of them: "Which papers compare against GPT-NeoX?", "Which works build on FairScale?"
_RELATES = content_words(
    "compare compares compared comparing comparison against versus vs build builds built "
    "building on upon extend extends extended extending use uses used using employ employs "
    "based mention mentions mentioning cite cites evaluate evaluates evaluated evaluating "
    "outperform outperforms beat beats baseline baselines over study studies studying involve "
    "involves involving apply applies applying adopt adopts rely relies leverage leverages "
    "implement implements implemented integrate integrates with or and the a an as "
    # experiments with a named thing: "report results on ImageNet", "run experiments with GPT
    # models", "evaluate on ARM processors"
    "report reports reported reporting result results experiment experiments run runs ran "
    "running test tests tested testing measure measures measured conduct conducts conducted "
    "on in model models processor processors problem problems dataset datasets") | GENERIC


def asks_for_summary(question: str, names: list[str]) -> bool:
    """"What is GPipe?", "What does ByteScheduler optimise?": a question that names a paper and
    asks nothing in particular about it, which the paper's abstract answers by being one."""
    return bool(names) and not content_words(without_names(question, names)) - GENERIC


def is_list_question(q: str) -> bool:
    """"Which systems target long-sequence training?" asks for papers; "Which two techniques
    does Q8BERT use?" asks what one named thing uses, which its abstract answers."""
    m = _LIST_Q.search(q)
    return m is not None and not _OF_ONE.match(q, m.end()) and not _OWNED.match(q)


def topic_of(q: str) -> str:
    """'which systems target long-sequence training?' -> 'target long-sequence training'."""
    return _LIST_LEAD.sub("", q).strip(" ?") or q


def names_pattern(names: list[str]) -> re.Pattern[str] | None:
    """One regex matching any of these names as a whole word: a text is scanned once, not once
    per name (a long message times thousands of names tied up a server worker)."""
    if not names:
        return None
    alternatives = "|".join(re.escape(n) for n in sorted(set(names), key=len, reverse=True))
    return re.compile(rf"(?<![\w-])(?:{alternatives})(?![\w-])", re.I)


def mentions(pattern: re.Pattern[str] | None, text: str) -> list[str]:
    """The names the pattern finds in text, lower-cased, in order of first mention."""
    if pattern is None:
        return []
    found: list[str] = []
    for m in pattern.finditer(text):
        name = m.group(0).lower()
        if name not in found:
            found.append(name)
    return found


# "... and propose PowerSGD for ...", "a system called PipeDream": the name a paper introduces
# (capitalised with another capital or a digit in it: "PowerSGD", "Q-BERT", "X-Former").
_INTRODUCES = re.compile(r"\b(?:propose|proposes|present|presents|introduce|introduces|develop|"
                         r"develops|design|designs|build|builds|called|named|dubbed|termed)\s+"
                         r"(?:(?:a|an|the|our|novel|new)\s+)*([A-Z](?=[\w-]*[A-Z0-9])[\w-]+)")
# "proposes an efficient GNN training system, Alpa, to ...": a name set beside what a paper
# introduces, after a comma.
_SET_BESIDE = re.compile(r"\b(?:propose|proposes|present|presents|introduce|introduces|develop|"
                         r"develops|design|designs|build|builds)\s+(?:a|an)\s+(?:[\w-]+\s+){0,4}?[\w-]+,\s+"
                         r"([A-Z](?=[\w-]*[A-Z0-9])[\w-]+)")


def introduced_names(text: str, beside: bool = False) -> set[str]:
    """The names `text` introduces its own work by ("we ... propose PowerSGD"); `beside`:
    and those it sets beside it ("proposes an efficient GNN training system, Alpa, to")."""
    names = {m.group(1).rstrip("-") for m in _INTRODUCES.finditer(text)}
    return names | {m.group(1) for m in _SET_BESIDE.finditer(text)} if beside else names


def asks_for_authors(question: str) -> bool:
    """The question asks about someone's papers: "by", "wrote", "authors", "X's"."""
    return bool(BY_AUTHOR.search(question)) or "'s" in question


def asks_only_for_authors_papers(question: str, author_names: list[str]) -> bool:
    """"Which papers did Bingsheng He co-author?": the question names authors and asks for
    nothing but their papers (not "Bingsheng He's papers on federated learning")."""
    rest = question
    for name in author_names:
        rest = re.sub(rf"(?i)(?<![\w-]){re.escape(name)}(?:'s)?(?![\w-])", " ", rest)
    return bool(author_names) and asks_for_authors(question) and not content_words(rest) - _AUTHOR_ASKS


def compared_in(question: str, paper: Paper) -> list[str]:
    """The names a comparison question sets against `paper`, when its abstract names every
    one of them as written ([] otherwise): runs of the question's capitalised, mixed-case or
    numbered words ("Horovod", "Switch Transformer", "cuSPARSE", "GPT-3"), not the paper's own
    name."""
    own = short_label(paper.title, paper.label).lower()
    # The first word's capital may be grammar's ("How", "Is"), unless the word has others.
    first = re.match(r"\s*[A-Z][a-z]*\b", question)
    rest = " " * first.end() + question[first.end():] if first else question
    found = []
    for run in _NAME_RUN.finditer(rest):
        name = run.group(0)
        if name.lower() == own or len(name) < 3:
            continue
        if not mentions_name(name, paper.abstract, compound=False):
            return []
        found.append(name)
    return found


# A name as a question writes it: words with a capital past their first letter or a digit, or
# capitalised, one or more separated by single spaces ("Switch Transformer", "GPT-3").
_NAME_WORD = r"(?:[A-Z][\w.+-]*[\w+]|[a-z][\w.+-]*[A-Z0-9][\w.+-]*[\w+])"
_NAME_RUN = re.compile(rf"(?<![\w-]){_NAME_WORD}(?: {_NAME_WORD})*(?![\w-])")
# "What do Pwnbench abstracts embed?": the list noun belongs to a named thing, which the
# question asks about.
_OWNED = re.compile(rf"^\s*(?i:what|which)\s+(?i:do|does|did)\s+{_NAME_WORD}(?:'s)?\s+"
                    r"(?i:papers|systems|works|methods|approaches|frameworks|abstracts|studies|tools|"
                    r"techniques)\b")
# After a list noun: "... does Q8BERT use", "... did Colossal-AI": the noun is what a
# named thing does or has, not a kind of paper.
_OF_ONE = re.compile(rf"\s+(?:does|do|did|has|have)\s+{_NAME_WORD}(?![\w-])")


def names_related(topic: str) -> list[str]:
    """The names a list question's topic relates papers to, when it asks nothing else of them
    ("compare against GPT-NeoX" -> ["GPT-NeoX"]; "optimize training on CPUs" -> [])."""
    names = [m.group(0) for m in _NAME_RUN.finditer(topic) if len(m.group(0)) >= 2]
    rest = topic
    for name in names:
        rest = rest.replace(name, " ")
    return names if names and not content_words(rest) - _RELATES else []


def term_words(topic: str) -> list[str]:
    """The words of a list topic that could be a term, its relating words ("study", "use",
    "models") taken off both ends: 2 to 6 of them, else []."""
    words = re.findall(r"[\w']+", topic)
    while words and not content_words(words[0]) - _RELATES:
        words.pop(0)
    while words and not content_words(words[-1]) - _RELATES:
        words.pop()
    return words if 2 <= len(words) <= 6 else []


def defined_term(topic: str, texts: Collection[str]) -> list[str]:
    """The acronym `texts` (the index's abstracts) define for a list topic's phrase, when the
    topic asks nothing else: "study mixture of experts" -> ["MoE"] where an abstract writes
    "Mixture-of-Experts (MoE)". Such a topic is then answered as "Which papers study MoE?"
    is, by the papers that write either, instead of by likeness (which, reading
    "Mixture-of-Experts" as one word, listed one of the three). [] otherwise."""
    words = term_words(topic)
    if not words:
        return []
    last = words[-1][:-1] if words[-1].endswith("s") and len(words[-1]) > 3 else words[-1]
    phrase = re.compile(r"(?<![\w-])(?i:" + r"[\s-]+".join(map(re.escape, [*words[:-1], last]))
                        + r"(?:s|es)?)\s*\(([A-Za-z][\w-]{1,9})\)")
    # the last word's forms first: a regex over every abstract of a large index costs seconds
    needles = (last, last.capitalize(), last.upper())
    found: dict[str, int] = {}
    for text in texts:
        if any(n in text for n in needles):
            for m in phrase.finditer(text):
                short = singular(m.group(1))
                if is_acronym(short) and short[0].lower() == words[0][0].lower():
                    found[short] = found.get(short, 0) + 1
    top = max(found.values(), default=0)
    return sorted(a for a, n in found.items() if n == top)


def name_test(names: list[str], texts: Collection[str]) -> Needled:
    """A test of whether a text names any of `names` as written; an acronym also by the long
    form `texts` (the index's abstracts) define for it: "Which works study FL?" is answered
    by papers on federated learning that never write "FL"."""
    patterns, plain = [], []
    for n in names:
        if not is_acronym(n):
            plain.append(n)
            continue
        forms = long_forms(n, texts)
        # Substrings one of which a naming text holds: a regex (case-blind in part) run on
        # every abstract would cost seconds at 100,000, these tests a small part of that.
        heads = {re.split(r"[\s-]", f)[0] for f in forms}
        needles = [singular(n), *(v for h in heads for v in (h, h.capitalize(), h.upper()))]
        patterns.append((needles, acronym_pattern(n, forms)))

    def names_any(text: str) -> bool:
        return any(any(x in text for x in needles) and p.search(text) for needles, p in patterns) \
            or any(mentions_name(n, text) for n in plain)
    return Needled(names_any, [x for needles, _ in patterns for x in needles] + plain)


class Needled:
    """A test of a text whose every match holds one of `needles`: an index finds the texts
    that can match by the needles (rag.retrieve.snapshot.Snapshot.papers_containing) and
    tests only those."""

    def __init__(self, test: Callable[[str], bool], needles: list[str]) -> None:
        self.test, self.needles = test, needles

    def __call__(self, text: str) -> bool:
        return self.test(text)


def definition_marks(names: list[str]) -> list[str]:
    """What a text that defines one of these acronyms holds ("(FL)", "(FLs)"): the texts
    `name_test` needs to find their long forms (rag.corpus.acronyms.long_forms)."""
    return [f"({singular(n)}{s})" for n in names if is_acronym(n) for s in ("", "s")]


# A figure with its unit: "2.5x", "4.5X", "3×", "10 times", "30%", "30 percent".
FIGURE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s*(x|×|times|%|percent|per cent)(?!\w)", re.I)
# "above 10%", "at least 2x", "up to 3x": a bound, not a figure a paper states
_BOUND = re.compile(r"(?:\b(?:above|over|more than|greater than|higher than|at least|at most|"
                    r"less than|below|under|up to|beyond|exceeding)|[<>≥≤])\s*$", re.I)


def figure_test(topic: str) -> Needled | None:
    """"Which papers report a 2.5x speedup?": a test of whether a text states the topic's
    figures (the same number, with a unit of the same kind: "2.5X faster" states "2.5x");
    None when the topic gives no figure."""
    wanted = []
    for m in FIGURE.finditer(topic):
        if _BOUND.search(topic[:m.start()]):
            return None
        number, unit = m.groups()
        units = r"%|percent|per cent" if unit.lower() in ("%", "percent", "per cent") else r"x|×|times"
        wanted.append((number, re.compile(rf"(?<![\w.]){re.escape(number)}\s*(?:{units})(?!\w)", re.I)))
    if not wanted:
        return None
    # the number's digits first: a regex over every abstract of a large index costs seconds
    return Needled(lambda text: any(number in text and p.search(text) for number, p in wanted),
                   [number for number, _ in wanted])


def mentions_name(name: str, text: str, compound: bool = True) -> bool:
    """`text` names `name` as written, alone or (`compound`) heading a compound
    ("Colossal-AI")."""
    end = r"(?!\w)" if compound else r"(?![\w-])"
    return name in text and re.search(rf"(?<![\w-]){re.escape(name)}{end}", text) is not None


# A run of names in the question ("GPipe, PipeDream and FlexGen"): capitalised words joined by
# commas, "and", "or", "vs". A name in such a run that the index does not know is reported.
_NAME = r"[A-Z][\w\-.]*[\w]"
# "Alpha, Beta and the Gamma": a name may follow its article in the run
_RUN = re.compile(rf"{_NAME}(?:(?:\s*,\s*(?:and\s+|or\s+)?|\s+(?:and|or|vs\.?|versus)\s+)(?:the\s+)?{_NAME})+")


def names_in_runs(question: str, named: list[str], known: Container[str],
                  every_run: bool = False) -> list[str]:
    """Names in the question's runs of names ("GPipe, Zorblax and PipeDream") that the index does
    not know, in a run that also names a paper it knows (`every_run`: in any run, for a
    comparison the abstracts found nothing for). Known names are matched whole first:
    "Pipe|Net" or "Auto-GPT.v2" is one name, not two unknown words."""
    tokens: dict[str, str] = {}

    def mask(m: re.Match[str]) -> str:
        token = f"Qq{len(tokens)}Named"  # a word the run pattern reads as one name
        tokens[token.lower()] = m.group(0).lower()
        return token

    pattern = names_pattern(named)
    masked = pattern.sub(mask, question) if pattern else question
    missing: list[str] = []
    for run in _RUN.finditer(masked):
        words = re.findall(_NAME, run.group(0))
        if every_run or any(w.lower() in tokens for w in words):
            missing += [w for w in words if w.lower() not in tokens and w.lower() not in known
                        and w not in missing]
    return missing
