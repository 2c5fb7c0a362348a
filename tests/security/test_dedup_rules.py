"""The dedup rule without a model: agreement beyond cosine, never a cross-language merge, the labelled set's shape."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest

from memoryd.indexer.config import WriteConfig
from memoryd.indexer.write.dedup import (
    APPEND,
    POSSIBLE_DUPLICATE,
    POSSIBLE_UPDATE,
    REINFORCE,
    REPLACE,
    Candidate,
    Thresholds,
    decide,
    judge,
)
from memoryd.indexer.write.lexical import features, overlap

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))  # the tuning is bench-only code
import dedup_tuning as cal

DATA = Path(__file__).parent / "data" / "dedup_pairs.jsonl"
TH = Thresholds.from_config(WriteConfig())
# The two reproductions, with the cosines multilingual-e5-small gave them.
TABS, VIM = "Always use tabs for indentation in Go files", "偏好使用 Vim 编辑器写代码"
PG, MICRO = "We decided to use PostgreSQL for the billing service", "我们决定采用微服务架构来重构整个订单系统"


def test_the_labelled_set_has_every_class_in_every_language_pair_and_both_reproductions() -> None:
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(rows) >= 150 and len({r["id"] for r in rows}) == len(rows)
    cells = Counter((r["class"], r["lang"]) for r in rows)
    assert set(cells) == {(c, lang) for c in cal.TRUST_CLASSES for lang in cal.TRUST_LANGS}
    assert min(cells.values()) >= 12
    pairs = {(r["existing"].rstrip("."), r["new"]) for r in rows if r["class"] != "paraphrase"}
    assert (TABS, VIM) in pairs and (PG, MICRO) in pairs
    assert len(cal.load_trust_pairs(DATA)) == len(rows)


@pytest.mark.parametrize(("old", "new", "score"), [(TABS, VIM, 0.85), (PG, MICRO, 0.832)])
def test_the_reproductions_are_appended_not_replaced_or_swallowed(old: str, new: str, score: float) -> None:
    v = judge(new, Candidate("f.md", 3, old, score), TH)
    assert v.action == APPEND and v.candidate is not None
    assert decide(new, [Candidate("f.md", 3, old, score)], TH).action == APPEND


@pytest.mark.parametrize("score", [0.80, 0.85, 0.9, 0.95, 0.999])
def test_across_languages_nothing_is_ever_replaced_or_reinforced(score: float) -> None:
    update = judge("用户现在改用 Neovim 了。", Candidate("f.md", 1, "The user prefers Vim.", score), TH)
    restate = judge("用户偏好 Vim。", Candidate("f.md", 1, "The user prefers Vim.", score), TH)
    assert update.action == APPEND and restate.action == APPEND
    assert update.flag == (POSSIBLE_UPDATE if score >= TH.replace["cross"] else None)
    assert restate.flag == (POSSIBLE_DUPLICATE if score >= TH.reinforce["cross"] else None)


def test_same_language_needs_shared_words_and_values_beyond_cosine() -> None:
    # an update that shares its frame is replaced; one that shares nothing is only flagged
    vim = Candidate("f.md", 1, "The user prefers Vim.", 0.95)
    assert judge("The user prefers Neovim now.", vim, TH).action == REPLACE
    flagged = judge("Pull requests need 1 reviewer.", Candidate("f.md", 1, "Deploys happen at 2 am.", 0.97), TH)
    assert flagged.action == APPEND and flagged.flag == POSSIBLE_UPDATE
    # a restatement is reinforced; one naming a value the other lacks is written
    tabs = Candidate("f.md", 1, "Use tabs for indentation in Go files.", 0.96)
    assert judge("Go files are indented with tabs.", tabs, TH).action == REINFORCE
    pg = Candidate("f.md", 1, "我们决定账单服务使用 PostgreSQL。", 0.99)
    v = judge("我们决定采用微服务架构来重构订单系统。", pg, TH)
    assert v.action == APPEND and "1 value(s)" in v.reason and "postgresql" not in v.reason.lower()


def test_agreement_features() -> None:
    f = features("The staging database runs PostgreSQL 15.", "Staging uses PostgreSQL 15 as its database.")
    assert f.entities_agree and f.overlap >= 0.75
    f = features("We decided to use PostgreSQL for the billing service.", "We decided to move orders to microservices.")
    assert f.missing_old == {"postgresql"} and not f.entities_agree
    assert overlap("团队每天早上九点半开站会。", "每天早上九点半团队开站会。") > 0.7
    assert overlap("小王对花生过敏。", "办公室周五下午六点关门。") == 0.0
    assert overlap("", "anything") == 0.0


def test_a_flagged_candidate_beats_a_plain_append_but_not_a_reinforce() -> None:
    new = "The user prefers Neovim now."
    flagged = Candidate("a.md", 1, "用户偏好 Vim。", 0.9)
    plain = Candidate("b.md", 2, "The cat is called Miso.", 0.89)
    assert decide(new, [plain, flagged], TH).candidate == flagged
    same = Candidate("c.md", 3, "the user prefers neovim now", 0.99)
    assert decide(new, [plain, flagged, same], TH).action == REINFORCE


def test_trust_summary_counts_harm() -> None:
    m = Counter({("unrelated", "replace"): 1, ("same_topic", "flag"): 2, ("update", "flag"): 3, ("update", "append"): 1,
                 ("paraphrase", "reinforce"): 4})
    s = cal.trust_summary(m)
    assert (s["unrelated_harmed"], s["updates_caught"], s["unrelated_flagged"]) == (1, 0.75, 2)
    assert "| update | 0 | 0 | 3 | 1 | 4 |" in cal.render_trust(m, "t")


def test_a_long_exchanged_run_in_the_same_frame_is_another_fact() -> None:
    coffee, walk = "用户每天早上都要喝一杯咖啡。", "用户每天早上上班前会去散步。"
    assert features(coffee, walk).residue >= 4 and features(coffee, walk).overlap >= TH.reinforce_overlap
    v = judge(walk, Candidate("f.md", 1, coffee, 0.99), TH)
    assert v.action == APPEND and "same frame" in v.reason
    assert features("团队每天早上九点半开站会。", "每天早上九点半团队开站会。").residue == 0
