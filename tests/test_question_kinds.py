"""The evidence questions answered in plain sight need (rag.answering.sources: `_authored`,
`_plainly_asked`): a spelled-out name, every compared name in the abstract, a question about
nothing but an author's papers. Each decides whether a question is answered whatever the
answer model makes of it."""

from __future__ import annotations

import pytest

from rag.corpus.acronyms import acronym_pattern
from rag.corpus.paper import Paper
from rag.question.asks import (
    asked_acronyms,
    count_in,
    evaluated_in,
    expansion_in,
    factor_in,
    link_in,
    spelled_out,
)
from rag.question.patterns import (
    asks_only_for_authors_papers,
    compared_in,
    defined_term,
    introduced_names,
    is_acronym,
    is_list_question,
    long_forms,
    mentions_name,
    names_related,
)
from rag.question.published import publication_asked


def paper(title: str, abstract: str) -> Paper:
    return Paper(paper_id="p1", title=title, abstract=abstract, source="x.txt")


@pytest.mark.parametrize(("abstract", "spelled"), [
    ("We propose Temporal Diffusion Policy Optimization with critic active neuron Reset "
     "(TDPO-R), a policy gradient algorithm. It works.", True),
    ("We build an efficient system (called TDPO-R) for training. It works.", True),
    ("TDPO-R (a policy gradient method for diffusion models) is new. It works.", True),
    ("TDPO-R (2.1x) is fast. We evaluate TDPO-R on three tasks.", False),  # a result, not a name
    ("We evaluate TDPO-R on three tasks.", False),
])
def test_a_name_is_spelled_out_only_where_the_abstract_says_what_it_stands_for(abstract: str, spelled: bool) -> None:
    assert (expansion_in("TDPO-R", abstract) is not None) is spelled



def test_the_acronym_a_question_asks_is_spelled_out_before_the_papers_name() -> None:
    text = "We present MAS (Merge and Split). It serves federated learning (FL) on edge devices (EDs)."
    assert asked_acronyms("What does FL stand for?") == ["FL"]
    assert spelled_out("What does FL stand for?", "MAS", text) == text.split(". ")[1]
    assert spelled_out("What does MAS stand for?", "MAS", text) == "We present MAS (Merge and Split)."
    assert expansion_in("FL", "We train MAS. It runs FL tasks.") is None
    assert expansion_in("ED", text)  # written in the plural

MEGABLOCKS = paper("MegaBlocks: Efficient Sparse Training with Mixture-of-Experts",
                   "We present MegaBlocks. It trains up to 40% faster than the Tutel library "
                   "and 2.4x faster than dense DNNs trained with Megatron-LM.")


@pytest.mark.parametrize(("question", "names"), [
    ("How does MegaBlocks compare with Tutel?", ["Tutel"]),
    ("MegaBlocks or Tutel: which trains faster?", ["Tutel"]),
    ("GPT-3 and Tutel against MegaBlocks?", []),  # a name opening the question counts too
    ("Is it faster than Megatron-LM and Tutel (MegaBlocks)?", ["Megatron-LM", "Tutel"]),
    # every name set against the paper must be in its abstract, whole
    ("How does MegaBlocks compare with Tutel and DeepSpeed?", []),
    ("How does MegaBlocks compare with the Switch Transformer?", []),
    ("How does MegaBlocks compare with Tut?", []),
])
def test_a_comparison_needs_every_name_it_sets_against_the_paper_in_the_abstract(question: str, names: list[str]) -> None:
    assert compared_in(question, MEGABLOCKS) == names


@pytest.mark.parametrize(("question", "only"), [
    ("Which papers did Bingsheng He co-author?", True),
    ("What paper by Bingsheng He is in the collection?", True),
    ("Bingsheng He's papers?", True),
    ("Which papers by Bingsheng He are about federated learning?", False),
    ("What speedup does the system of Bingsheng He report?", False),
])
def test_an_author_question_is_answered_from_the_records_only_when_it_asks_nothing_else(question: str, only: bool) -> None:
    assert asks_only_for_authors_papers(question, ["bingsheng he"]) is only


@pytest.mark.parametrize(("question", "is_list"), [
    ("Which systems target long-sequence training?", True),
    ("Which papers does the corpus hold on federated learning?", True),
    ("What methods do these papers use?", True),
    # the list noun is what one named thing uses or beats: its abstract answers
    ("Which two techniques does SDP4Bit use to reduce communication?", False),
    ("Which systems does Tutel outperform?", False),
    # the list noun belongs to a named thing: what it holds
    ("What do Pwnbench abstracts embed?", False),
    ("What do these papers say about pipelines?", True),
])
def test_a_question_about_what_one_named_system_uses_is_not_a_list_of_papers(question: str, is_list: bool) -> None:
    assert is_list_question(question) is is_list


@pytest.mark.parametrize(("topic", "names"), [
    ("compare against Megatron-LM", ["Megatron-LM"]),
    ("build on, extend, or compare against DeepSpeed", ["DeepSpeed"]),
    ("use PyTorch or TensorFlow", ["PyTorch", "TensorFlow"]),
    # experiments with a named thing, and the kind of thing it is
    ("report results on ImageNet", ["ImageNet"]),
    ("run experiments with BERT models", ["BERT"]),
    ("evaluate on ARM processors", ["ARM"]),
    ("report faster training on GPUs", []),
    # the topic asks something of the papers besides the name: a question for the models
    ("optimize deep learning on CPUs", []),
    ("build on vision-language models such as CLIP", []),
    ("target long-sequence training", []),
])
def test_a_list_topic_relates_papers_to_a_name_only_when_it_asks_nothing_else(topic: str, names: list[str]) -> None:
    assert names_related(topic) == names


def test_a_name_is_mentioned_as_written_alone_or_heading_a_compound() -> None:
    assert mentions_name("DeepSpeed", "built on DeepSpeed, a library")
    assert mentions_name("DeepSpeed", "We present DeepSpeed-Ulysses.")
    assert not mentions_name("DeepSpeed", "We present DeepSpeed-Ulysses.", compound=False)
    assert not mentions_name("DeepSpeed", "unlike MyDeepSpeed")
    assert not mentions_name("FL", "a flexible FLOP count")  # as written: case and whole word


@pytest.mark.parametrize(("name", "acronym"), [
    ("FL", True), ("GNNs", True), ("MoE", True), ("DLRM", True), ("GPT-3", True),
    ("DeepSpeed", False), ("Megatron-LM", False), ("Tutel", False), ("Switch Transformer", False),
])
def test_an_acronym_is_a_short_word_of_capitals(name: str, acronym: bool) -> None:
    assert is_acronym(name) is acronym


def test_an_acronym_is_read_as_the_texts_define_it() -> None:
    texts = ["Abstract:Federated learning (FL) enables clients to train together.",
             "We study FL at scale.",  # uses it without defining it
             "Cross-device federated learning (FL) has been well-studied.",
             "Graph Neural Networks (GNNs) are used; a system for Mixture-of-Experts (MoE) training."]
    assert long_forms("FL", texts) == ["federated learning"]
    assert long_forms("GNNs", texts) == ["graph neural networks"]
    assert long_forms("MoE", texts) == ["mixture-of-experts"]
    assert long_forms("RL", texts) == []
    # the commonest definition wins
    rl = ["reinforcement learning (RL) a", "deep reinforcement learning (RL) b", "representation learning (RL) c"]
    assert long_forms("RL", rl) == ["reinforcement learning"]


def test_a_factor_is_found_with_every_word_it_is_asked_with() -> None:
    text = ("We present Vortex. Vortex outperforms DeepSpeed by 3.76x on average. "
            "It also cuts memory use by 40% on GPUs.")
    assert factor_in("What speedup does Vortex achieve?", "Vortex", text) == \
        "Vortex outperforms DeepSpeed by 3.76x on average."
    assert factor_in("How much faster is Vortex than DeepSpeed?", "Vortex", text)
    assert factor_in("What speedup does Vortex get on TPUs?", "Vortex", text) is None
    assert factor_in("What does Vortex present?", "Vortex", text) is None  # not asked for a factor



def test_what_a_paper_is_evaluated_on_is_its_last_sentence_saying_so_with_every_word_asked() -> None:
    text = ("Our benchmarking results show that loading is the bottleneck with large datasets. "
            "We present Vortex. Evaluation on five widely used datasets with x86 processors shows "
            "that Vortex is 45x faster. Experimental results show 3x speedups on average.")
    said = "Evaluation on five widely used datasets with x86 processors shows that Vortex is 45x faster."
    assert evaluated_in("What is Vortex evaluated on?", "Vortex", text) == said
    assert evaluated_in("On which datasets was Vortex tested?", "Vortex", text) == said
    assert evaluated_in("How is Vortex evaluated?", "Vortex", text) == said
    assert evaluated_in("Is Vortex evaluated on TPUs?", "Vortex", text) is None  # it says x86
    assert evaluated_in("What does Vortex present?", "Vortex", text) is None  # asks no evaluation
    # which datasets: a sentence that only counts them names none
    counted = "We present Vortex. Experiments are conducted on two popular datasets."
    assert evaluated_in("What is Vortex evaluated on?", "Vortex", counted)
    assert evaluated_in("Which datasets was Vortex evaluated on?", "Vortex", counted) is None

def test_where_and_when_a_list_asks_its_papers_appeared() -> None:
    venues = {"mlsys", "aaai", "iccv", "oncology", "clinical"}
    assert publication_asked("Which MLSys 2023 papers are about GNNs?", venues) == ({"mlsys"}, {2023})
    assert publication_asked("Which papers from 2022 study federated learning?", venues) == (set(), {2022})
    assert publication_asked("Which ICCV'23 papers use prompts?", venues) == ({"iccv"}, {2023})
    assert publication_asked("Which AAAI papers study FL?", venues) == ({"aaai"}, set())
    # a journal's ordinary words, or a year that is not when the papers appeared, do not count
    assert publication_asked("Which papers study clinical oncology trials?", venues) == (set(), set())
    assert publication_asked("Which papers report results on the 2019 benchmark?", venues) == (set(), set())


def test_a_list_topic_is_read_as_the_acronym_the_texts_define_for_it() -> None:
    texts = ["We present a system for efficient Mixture-of-Experts (MoE) training.",
             "Sparse mixture of experts (SMoE) layers route tokens.",
             "Reinforcement learning (RL) agents; deep reinforcement learning (RL) too."]
    assert defined_term("study mixture of experts", texts) == ["MoE"]
    assert defined_term("use mixture-of-experts models", texts) == ["MoE"]
    assert defined_term("apply reinforcement learning", texts) == ["RL"]
    # a phrase no text defines, one word, or a topic that asks more is left to the models
    assert defined_term("study pipeline parallelism", texts) == []
    assert defined_term("study experts", texts) == []
    assert defined_term("cut the cost of mixture of experts training", texts) == []


def test_an_acronym_is_mentioned_by_its_long_form_in_any_case_or_number() -> None:
    forms = ["graph neural networks"]
    gnns = acronym_pattern("GNNs", forms)
    assert gnns.search("a scalable Graph Neural Network that learns")
    assert gnns.search("accelerating GNN training")  # the singular as written
    assert not gnns.search("a graph of neural networks")
    # a hyphen and a space join a long form's words alike
    moe = acronym_pattern("MoE", ["mixture-of-experts"])
    assert moe.search("sparse mixture of experts layers") and moe.search("Mixture-of-Experts (MoE)")
    assert not acronym_pattern("FL", ["federated learning"]).search("reinforcement learning for flows")


@pytest.mark.parametrize(("question", "counted"), [
    ("How many developers took part in the user study?", "17 software developers"),
    ("How many models does the benchmark measure?", "20+ models"),
    ("Up to how many tokens can it be scaled?", "128K tokens"),
    ("How many GPUs were used?", None),  # the abstract counts no GPUs
    ("How many days did pretraining take?", None),
    ("What speedup does it report?", None),  # asks for no count
])
def test_a_count_is_found_only_for_the_thing_counted(question: str, counted: str | None) -> None:
    abstract = ("We report on a user study with 17 software developers. SysNoise is measured on "
                "20+ models. It scales to 128K tokens. It trains 3x faster on 2 clusters.")
    found = count_in(question, abstract)
    assert (found is None) if counted is None else (found is not None and counted in found)


def test_the_name_a_paper_introduces_is_read_from_its_own_words() -> None:
    text = ("In this work, we explore a paradigm. We instantiate it and propose NeuroShard for "
            "sharding. We present a system called HEAT. We design H-GCN, a novel accelerator. "
            "We propose a new method for GPUs. Results beat Megatron-LM.")
    assert introduced_names(text) == {"NeuroShard", "HEAT", "H-GCN"}
    # set beside what it introduces, after a comma
    beside = "This paper proposes an efficient GNN training system, AdaQP, to expedite training."
    assert introduced_names(beside, beside=True) == {"AdaQP"} and introduced_names(beside) == set()


def test_where_code_lives_is_found_only_when_asked() -> None:
    text = "We present Vortex, built on PyTorch 2.1. Code: https://github.com/x/vortex."
    for asked in ("Is Vortex open source?", "Where is the code of Vortex?", "Where can I find Vortex?"):
        assert link_in(asked, text) == "Code: https://github.com/x/vortex.", asked
    assert link_in("What does Vortex find?", text) is None
    assert link_in("Is Vortex open source?", "We present Vortex.") is None
