"""Calibrated hit scores and abstention: the model, the engine, the socket params and the CLI."""

from __future__ import annotations

import dataclasses
import itertools
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memoryd.daemon.api.read import ReadMethods
from memoryd.daemon.api.requests import parse_context, parse_search
from memoryd.daemon.client.cli import build_parser
from memoryd.daemon.roots import RootMap
from memoryd.daemon.rpc.errors import InvalidParams
from memoryd.daemon.rpc.jsonrpc import Peer
from memoryd.daemon.watch.pathfilter import PathFilter
from memoryd.indexer.config import Config, EmbeddingConfig, SearchConfig, validate
from memoryd.indexer.embedding import load_embedder
from memoryd.indexer.engine import MemoryIndex, open_index
from memoryd.indexer.errors import ConfigError
from memoryd.indexer.ingestion.reconcile import reconcile
from memoryd.indexer.search import calibration
from memoryd.indexer.search.calibration import Features, coverage, fitted_for, monotone, probability, with_margins
from memoryd.indexer.search.content_words import content_terms
from memoryd.indexer.search.query import Query
from tests.helpers import make_config

OWNER = Peer(pid=1, uid=os.getuid(), gid=os.getgid())
FILTER = PathFilter(("*.md",), ())
NOTES = {
    "MEMORY.md": "# Memory\n\n- The user prefers Neovim over Vim for editing.\n"
                 "- Deploys happen on Fridays after the standup.\n",
    "memory/2024-03-01.md": "# 2024-03-01\n\n- Booked flights to Lisbon for the conference.\n"
                            "- Adopted a grey cat named Pixel from the shelter.\n"
                            "- 周末和朋友去爬山，天气很好。\n",
}
unit = st.floats(0.0, 1.0)


# -- the model -----------------------------------------------------------------------------


@given(unit, unit, unit, st.booleans())
def test_probability_is_a_relevance_in_0_1(cos: float, cov: float, missing: float, keyword_only: bool) -> None:
    p = probability(Features(None if keyword_only else cos, cov, missing))
    assert 0.0 <= p <= 1.0


@given(unit, unit, unit, st.floats(0.0, 0.5))
def test_more_similarity_and_more_query_words_never_lower_the_score(
        cos: float, cov: float, missing: float, step: float) -> None:
    base = probability(Features(cos, cov, missing))
    assert probability(Features(min(cos + step, 1.0), cov, missing)) >= base
    assert probability(Features(cos, min(cov + step, 1.0), missing)) >= base
    assert probability(Features(None, min(cov + step, 1.0), missing)) >= probability(Features(None, cov, missing))


@given(unit, unit, unit, st.floats(0.0, 0.5))
def test_query_words_the_memory_never_saw_never_raise_the_score(
        cos: float, cov: float, missing: float, step: float) -> None:
    more = min(missing + step, 1.0)
    assert probability(Features(cos, cov, more)) <= probability(Features(cos, cov, missing))
    assert probability(Features(None, cov, more)) <= probability(Features(None, cov, missing))


@given(st.lists(unit, max_size=30))
def test_monotone_scores_never_rise_down_the_list_and_never_drop_a_hit(scores: list[float]) -> None:
    out = monotone(scores)
    assert len(out) == len(scores)
    assert all(a >= b for a, b in itertools.pairwise(out))
    assert all(o >= s for o, s in zip(out, scores, strict=True))
    assert out[-1:] == scores[-1:]


@given(unit, unit, unit, st.floats(-3.0, 6.0), st.floats(0.0, 6.0))
def test_a_query_with_no_content_word_is_never_answered(
        cos: float, cov: float, missing: float, margin: float, lead: float) -> None:
    assert probability(Features(cos, cov, missing, content=False, margin=margin, lead=lead)) == 0.0
    assert probability(Features(None, cov, missing, content=False)) == 0.0


@given(unit, unit, unit, st.floats(-3.0, 6.0), st.floats(0.0, 6.0), st.floats(0.0, 1.0))
def test_a_hit_standing_further_above_its_candidates_never_scores_lower(
        cos: float, cov: float, missing: float, margin: float, lead: float, step: float) -> None:
    base = probability(Features(cos, cov, missing, margin=margin, lead=lead))
    assert probability(Features(cos, cov, missing, margin=margin + step, lead=lead)) >= base
    assert probability(Features(cos, cov, missing, margin=margin, lead=lead + step)) <= base


def test_margins_are_measured_against_the_query_s_own_candidates() -> None:
    cosines = {1: 0.90, 2: 0.80, 3: 0.80, **{i: 0.78 - 0.001 * i for i in range(4, 12)}}
    feats = {i: Features(c, 0.5, 0.0) for i, c in cosines.items()}
    out = with_margins(feats, cosines)
    assert out[1].lead == 0.0 and out[1].margin > out[2].margin == out[3].margin > out[4].margin
    assert out[2].lead == pytest.approx(out[1].margin - out[2].margin)
    flat = {i: 0.8 + i * 1e-4 for i in range(1, 12)}  # near-identical candidates are no evidence
    flat_feats = with_margins({i: Features(c, 0.5, 0.0) for i, c in flat.items()}, flat)
    assert max(f.margin for f in flat_feats.values()) < 0.1
    few = dict(list(cosines.items())[: calibration.MARGIN_CANDIDATES - 1])  # too few to measure: neither helped
    few_feats = with_margins({i: feats[i] for i in few}, few)              # nor hurt
    assert {f.margin for f in few_feats.values()} == {calibration.UNMEASURED_MARGIN}
    assert {f.lead for f in few_feats.values()} == {0}
    assert with_margins(feats, None) == feats
    keyword_only = {1: Features(None, 0.5, 0.0)}
    assert with_margins(keyword_only, cosines) == keyword_only


@pytest.mark.parametrize("prompt", ["continue", "thanks, that works", "why is it not working?", "AND OR NOT",
                                    "the a of", "ok", "好的", "继续", "谢谢", "Yes please, go on."])
def test_chat_turns_have_no_content_words(prompt: str) -> None:
    from memoryd.indexer.search import keyword

    assert content_terms(keyword.query_terms(prompt)) == []


def test_a_question_to_a_memory_made_of_common_words_is_still_scored(index: MemoryIndex) -> None:
    """No content word, but an intent ("when did I start...?"): its terms count, it is not scored 0."""
    res = index.query(Query("When did I start running?", k=3, explain=True)).to_json()
    assert res["hits"] and res["hits"][0]["explain"]["calibration"]["content"] is True


@pytest.mark.parametrize(("query", "kept"), [
    ("What is Jolene's blood type?", {"jolen", "blood"}),
    ("What programming language does Deborah use at work?", {"deborah", "program"}),
    ("Where did we fly for the Lisbon conference?", {"fli", "lisbon", "confer"}),
    ("她上周去爬山了吗", {"爬山"}),
    ("what did I work on yesterday?", {"yesterday"}),
    ("我什么时候去成都", {"成都"}),
    ("同事是谁", {"同事"}),
])
def test_names_and_topics_are_content_words(query: str, kept: set[str]) -> None:
    from memoryd.indexer.search import keyword

    terms = content_terms(keyword.query_terms(query))
    assert kept <= set(terms), terms


def test_coverage_weighs_rare_words_more() -> None:
    weights = {"lisbon": 3.0, "flight": 1.0}
    assert coverage(["lisbon", "flight"], {"lisbon"}, weights) == pytest.approx(0.75)
    assert coverage(["lisbon", "flight"], set(), weights) == 0.0
    assert coverage([], {"lisbon"}, weights) == 0.0
    assert calibration.term_weight(0, 100) > calibration.term_weight(50, 100) > 0


def test_cosines_count_only_for_the_model_they_were_fitted_for() -> None:
    assert fitted_for("multilingual-e5-small-q4:1571fc9827503943")
    assert not fitted_for("multilingual-e5-small-q4:1571fc9827503943;pooling=cls")
    assert not fitted_for("hash-64")


# -- config and params ---------------------------------------------------------------------


@pytest.mark.parametrize("bad", [-0.1, 1.5])
def test_min_score_outside_0_1_is_a_config_error(bad: float) -> None:
    cfg = dataclasses.replace(Config(), search=dataclasses.replace(SearchConfig(), min_score=bad))
    with pytest.raises(ConfigError, match=r"search\.min_score"):
        validate(cfg)


def test_search_takes_no_threshold_unless_asked_and_default_means_the_configured_one(tmp_path: Path) -> None:
    defaults = dataclasses.replace(SearchConfig(), min_score=0.4)
    assert parse_search({"query": "x"}, OWNER, defaults, tmp_path).min_score is None
    assert parse_search({"query": "x", "min_score": 0.7}, OWNER, defaults, tmp_path).min_score == 0.7
    assert parse_search({"query": "x", "min_score": "default"}, OWNER, defaults, tmp_path).min_score == 0.4
    with pytest.raises(InvalidParams, match="min_score"):
        parse_search({"query": "x", "min_score": 1.5}, OWNER, defaults, tmp_path)


def test_context_abstains_at_the_configured_threshold_unless_told_otherwise(tmp_path: Path) -> None:
    params = {"query": "x", "max_tokens": 100}
    assert parse_context(params, OWNER, tmp_path, 0.4).min_score == 0.4
    assert parse_context({**params, "min_score": 0}, OWNER, tmp_path, 0.4).min_score == 0.0
    with pytest.raises(InvalidParams, match="min_score"):
        parse_context({**params, "min_score": -1}, OWNER, tmp_path, 0.4)


@pytest.mark.parametrize("command", ["search", "context"])
def test_cli_min_score_outside_0_1_is_a_usage_error(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args([command, "--min-score", "2", "x"])
    assert exc.value.code == 2 and "0..1" in capsys.readouterr().err
    assert build_parser().parse_args([command, "--min-score", "0.3", "x"]).min_score == 0.3


# -- the engine, with the test embedder (its cosines are not calibrated: keyword-only scores) --


@pytest.fixture
def index(tmp_path: Path):
    root = tmp_path / "root"
    for rel, text in NOTES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    cfg = make_config(root, tmp_path / "data")
    idx = open_index(cfg, load_embedder(cfg.embedding, cfg.data_dir))
    reconcile(idx, [root], FILTER)
    yield idx
    idx.close()


def test_scores_are_absolute_and_explain_keeps_the_components(index: MemoryIndex) -> None:
    res = index.query(Query("Lisbon conference flights", k=5, explain=True)).to_json()
    scores = [h["score"] for h in res["hits"]]
    assert scores and all(0.0 <= s <= 1.0 for s in scores) and scores == sorted(scores, reverse=True)
    assert scores[0] >= SearchConfig().min_score
    why = res["hits"][0]["explain"]
    assert set(why["calibration"]) == {"cosine", "coverage", "missing", "content", "margin", "lead"} and "fused" in why
    assert why["calibration"]["cosine"] is None  # the test embedder has no fitted coefficients
    off = index.query(Query("kubernetes helm chart ingress certificate rotation", k=5)).to_json()
    assert off["hits"] and off["hits"][0]["score"] < SearchConfig().min_score  # unlike min-max, not 1.0


@pytest.mark.parametrize("prompt", ["thanks, that works", "continue", "好的"])
def test_a_chat_turn_scores_0_even_when_its_words_are_stored(index: MemoryIndex, prompt: str) -> None:
    res = index.query(Query(prompt, k=5, explain=True, mode="hybrid")).to_json()
    assert all(h["score"] == 0.0 and h["explain"]["calibration"]["content"] is False for h in res["hits"])
    abstained = index.query(Query(prompt, k=5, min_score=SearchConfig().min_score)).to_json()
    assert abstained["abstained"] is True and "no content word" in abstained["reason"]
    assert "no content word" not in index.query(Query("kubernetes helm", k=5, min_score=0.99)).to_json()["reason"]


def test_min_score_cuts_the_list_and_says_why_when_nothing_is_left(index: MemoryIndex) -> None:
    query = "kubernetes helm chart ingress certificate rotation"
    assert "abstained" not in index.query(Query(query, k=5)).to_json()
    res = index.query(Query(query, k=5, min_score=SearchConfig().min_score)).to_json()
    assert res["hits"] == [] and res["abstained"] and "min_score" in res["reason"]
    kept = index.query(Query("Lisbon conference flights", k=5, min_score=SearchConfig().min_score)).to_json()
    assert kept["hits"] and all(h["score"] >= SearchConfig().min_score for h in kept["hits"])
    assert index.query(Query(query, k=5, min_score=0.0)).to_json()["hits"]


def test_socket_context_abstains_and_says_so_search_when_asked(index: MemoryIndex, tmp_path: Path) -> None:
    roots = RootMap([tmp_path / "root"])
    reads = ReadMethods(index=index, roots=lambda: roots, worker=None, search=SearchConfig(),  # type: ignore[arg-type]
                        path_filter=FILTER, max_file_bytes=1 << 20,
                        count_tokens=lambda texts: [len(t.split()) for t in texts], query_vector=lambda q: None)
    off = reads.context({"query": "kubernetes helm chart ingress certificate rotation", "max_tokens": 500}, OWNER)
    assert off["text"] == "" and off["abstained"] is True and "min_score" in off["reason"]
    on = reads.context({"query": "Lisbon conference flights", "max_tokens": 500}, OWNER)
    assert "Lisbon" in on["text"] and "abstained" not in on
    forced = reads.context({"query": "kubernetes helm chart", "max_tokens": 500, "min_score": 0}, OWNER)
    assert forced["sources"] and "abstained" not in forced
    off_search = {"query": "kubernetes helm chart ingress certificate rotation"}
    assert reads.search(off_search, OWNER)["hits"]  # search abstains only when asked
    assert reads.search({**off_search, "min_score": "default"}, OWNER)["abstained"] is True


# -- with the real model -------------------------------------------------------------------


@pytest.mark.slow
def test_real_model_off_topic_scores_below_the_threshold_and_on_topic_above(tmp_path: Path) -> None:
    root = tmp_path / "root"
    for rel, text in NOTES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    cfg = dataclasses.replace(make_config(root, tmp_path / "data"), embedding=EmbeddingConfig())
    idx = open_index(cfg, load_embedder(cfg.embedding, tmp_path / "model"))
    try:
        reconcile(idx, [root], FILTER)
        threshold = SearchConfig().min_score

        def top(query: str) -> float:
            hits = idx.query(Query(query, k=5, explain=True)).to_json()["hits"]
            assert hits[0]["explain"]["calibration"]["cosine"] is not None  # the fitted model's cosines count
            return float(hits[0]["score"])

        for query in ("kubernetes helm chart ingress TLS certificate rotation", "What is the capital of Kazakhstan?",
                      "怎样编译带有联邦信息处理标准支持的加密库？", "thanks, that works", "continue",
                      "TypeError: 'NoneType' object is not subscriptable", "What is the cat's blood type?"):
            assert top(query) < threshold, query
        for query in ("Which editor does the user prefer?", "Which flights did we book for the conference?",
                      "周末去爬山了吗"):
            assert top(query) >= threshold, query
    finally:
        idx.close()
