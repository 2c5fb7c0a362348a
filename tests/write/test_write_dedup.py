"""Dedup/conflict: the lexical signals, the decision rule, and the calibration set's shape."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

from memoryd.indexer.config import WriteConfig
from memoryd.indexer.write.dedup import APPEND, REINFORCE, REPLACE, Candidate, Thresholds, decide, judge
from memoryd.indexer.write.lexical import features, negated, pair_kind, swapped, update_cue, values

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))  # the tuning is bench-only code
import dedup_tuning as cal

DATA = Path(__file__).parents[1] / "data" / "calibration.jsonl"
TH = Thresholds({"latin": 0.90, "cjk": 0.935, "cross": 0.83}, {"latin": 0.90, "cjk": 0.94, "cross": 0.805})


@pytest.mark.parametrize(("text", "expected"), [
    ("We deploy every Tuesday at 10:00.", {"weekday:tue", "10"}),
    ("每周二上午十点发布。", {"weekday:tue", "10"}),
    ("我们星期四下午开会", {"weekday:thu"}),
    ("Standups are at 9:30 on Fridays.", {"9:30", "weekday:fri"}),
    ("Code reviews need two approvals.", {"2"}),
    ("代码评审需要两位同事批准。", {"2"}),
    ("王芳的生日是三月十二日。", {"3", "12"}),
    ("Bob's birthday is on 12 March.", {"bob", "12", "3"}),
    ("Alice Chen leads the payments team.", {"alice", "chen"}),
    ("Maria handles escalations.", set()),  # a lone capitalised sentence opener is not trusted
    ("The user prefers Neovim and PostgreSQL 16.", {"neovim", "postgresql", "16"}),
    ("项目的 Python 版本是 3.10。", {"python", "3.10"}),
    ("团队用 jenkins 做持续集成", {"jenkins"}),  # Latin words inside Chinese are values
])
def test_values(text: str, expected: set[str]) -> None:
    assert values(text) == expected


@pytest.mark.parametrize(("text", "neg"), [
    ("The user no longer drinks coffee.", True), ("The user doesn't eat meat.", True),
    ("Never deploy on Fridays.", True), ("The user drinks coffee.", False),
    ("用户不喝咖啡。", True), ("用户没有车。", True), ("两个方案不同。", False), ("这个方案不错。", False),
])
def test_negation(text: str, neg: bool) -> None:
    assert negated(text) is neg


def test_update_cues_swaps_and_kinds() -> None:
    assert update_cue("Bob Lee is now the tech lead.") and update_cue("API 限流调整为每分钟 250 次。")
    assert not update_cue("Bob Lee is the tech lead.")
    assert swapped("The user prefers tea in the afternoon.", "The user prefers coffee in the afternoon.")
    assert swapped("用户的直属经理是陈明。", "用户的直属经理是赵磊。")
    assert not swapped("Flaky tests are tracked in the QA board.", "Flaky tests are tracked on the QA board.")
    assert not swapped("王芳的生日是三月十二日。", "王芳的生日是3月12日。")  # same numbers, two scripts
    assert not swapped("The user prefers dark mode.", "In all editors, the user likes a dark theme.")
    assert pair_kind("The user prefers Vim.", "用户偏好 Vim。") == "cross"
    assert pair_kind("前端部署在 Cloudflare Pages 上。", "前端使用 React 18。") == "cjk"
    f = features("Deploys are on Tuesday.", "Deploys are on Thursday now.")
    assert f.substituted and f.update_cue and not f.negation_flip and f.changed
    assert set(f.signals()) == {"substituted", "swap", "update_cue"}


@pytest.mark.parametrize(("old", "new", "score", "action"), [
    ("The user prefers Vim.", "the user prefers vim", 0.5, REINFORCE),  # same text: always reinforce
    ("The user prefers Vim as their editor.", "The user prefers Neovim as their editor.", 0.965, REPLACE),
    ("The user prefers Vim as their editor.", "The user prefers Neovim as their editor.", 0.85, APPEND),
    ("The user is based in Lisbon.", "The user works remotely from Lisbon.", 0.94, REINFORCE),
    ("The user is based in Lisbon.", "The user works remotely from Lisbon.", 0.89, APPEND),
    ("用户偏好使用深色模式。", "用户在编辑器里偏好使用深色模式。", 0.945, REINFORCE),
    ("用户偏好使用深色模式。", "用户在编辑器里偏好使用深色模式。", 0.93, APPEND),  # cjk needs 0.935
    ("用户偏好使用深色模式。", "用户喜欢暗色主题的界面。", 0.945, APPEND),  # only 用户 shared: not confirmed
    ("The user prefers dark mode.", "用户偏好深色模式。", 0.843, APPEND),  # cross: never reinforced...
    ("The user prefers Vim as their editor.", "用户现在偏好使用 Neovim 编辑器。", 0.837, APPEND),  # ...nor replaced
])
def test_judge(old: str, new: str, score: float, action: str) -> None:
    v = judge(new, Candidate("f.md", 3, old, score), TH)
    assert v.action == action and v.reason and v.candidate is not None


def test_decide_prefers_reinforce_then_replace_then_score() -> None:
    new = "The user prefers Neovim as their editor."
    replace = Candidate("a.md", 1, "The user prefers Vim as their editor.", 0.97)
    reinforce = Candidate("b.md", 2, "The user prefers Neovim as their editor", 0.93)
    other = Candidate("c.md", 3, "The user prefers dark mode.", 0.88)
    assert decide(new, [], TH).action == APPEND and decide(new, [], TH).candidate is None
    assert decide(new, [replace, other], TH).candidate == replace
    assert decide(new, [replace, reinforce, other], TH).candidate == reinforce
    low = Candidate("d.md", 4, "Deploys happen on Fridays.", 0.5)
    v = decide(new, [low, Candidate("e.md", 5, "Tea is served at four.", 0.6)], TH)
    assert v.action == APPEND and v.candidate is not None and v.candidate.path == "e.md"


def test_thresholds_come_from_the_config() -> None:
    th = Thresholds.from_config(WriteConfig())
    assert th.reinforce["latin"] == WriteConfig().reinforce_threshold and th.replace["cross"] == 0.805


def test_calibration_set_has_40_pairs_per_class_in_every_language_and_both_splits() -> None:
    pairs = cal.load_pairs(DATA)
    assert len({p.id for p in pairs}) == len(pairs)
    per_class = Counter(p.cls for p in pairs)
    assert set(per_class) == set(cal.CLASSES) and min(per_class.values()) >= 40
    for cls in cal.CLASSES:
        for lang in ("en", "zh", "cross"):
            sub = [p for p in pairs if p.cls == cls and p.lang == lang]
            assert {p.split for p in sub} == {"tune", "heldout"}, (cls, lang)
    assert sum(p.split == "heldout" for p in pairs) >= 70
    assert all(p.existing.strip() and p.new.strip() for p in pairs)


def test_search_separates_synthetic_pairs_and_costs_weigh_lost_information() -> None:
    pairs = [cal.Pair(f"{c}{i}", c, "en", "tune", old, new) for i in range(3) for c, old, new in [
        ("duplicate", "The user likes tea.", "The user likes tea"),
        ("paraphrase", "The user likes a dark theme.", "A dark colour scheme is what the user prefers."),
        ("conflicting_update", "Deploys are on Tuesday.", "Deploys are on Thursday."),
        ("unrelated", "The cat is named Miso.", "Backups run at 2 a.m.")]]
    cos = {p.id: {"duplicate": 0.99, "paraphrase": 0.95, "conflicting_update": 0.96, "unrelated": 0.7}[p.cls]
           for p in pairs}
    th = cal.search(pairs, cos, TH)
    m = cal.confusion(pairs, cos, th)
    assert cal.accuracy(m) == 1.0 and cal.cost(m) == 0.0
    # unrelated pairs share no words, so they never reach a replace whatever its cosine threshold
    assert 0.7 < th.reinforce["latin"] <= 0.95 and 0.6 < th.replace["latin"] <= 0.96
    assert cal.COST[(APPEND, REPLACE)] > cal.COST[(APPEND, REINFORCE)] > cal.COST[(REINFORCE, APPEND)]
    assert "| duplicate (reinforce) | 3 | 0 | 0 | 3 |" in cal.render(m, "t")
