"""The ui's view helpers (pure functions): highlighting that escapes, line specs, section bodies, hit
excerpts and the dashboard's backlog figures."""

from __future__ import annotations

import pytest

pytest.importorskip("jinja2", reason="the ui's dependencies are missing from this venv")

from memoryd.daemon.ui import views


def test_highlight_marks_query_words_and_escapes_everything_else() -> None:
    out = views.highlight("<b>Deploy</b> to prod & deploy again", views.query_words("deploy prod"))
    assert str(out) == "&lt;b&gt;<mark>Deploy</mark>&lt;/b&gt; to <mark>prod</mark> &amp; <mark>deploy</mark> again"


def test_highlight_of_markup_in_the_query_itself_stays_escaped() -> None:
    out = views.highlight("a <script> tag", views.query_words("script"))
    assert str(out) == "a &lt;<mark>script</mark>&gt; tag"


def test_highlight_without_words_only_escapes() -> None:
    assert str(views.highlight("x < y", views.query_words("? !"))) == "x &lt; y"


def test_visible_shows_controls_and_bidi_but_keeps_markup_built_here() -> None:
    assert views.visible("a\x1bb\u202ec") == "a\\x1bb\\u202ec"
    marked = views.highlight("x", None)
    assert views.visible(marked) is marked
    assert views.visible(3) == 3


@pytest.mark.parametrize(("spec", "lines"), [("3", {3}), ("3-5", {3, 4, 5}), ("3,7-8", {3, 7, 8}), ("", set()),
                                             ("x,2", {2}), ("5-3", set()), (None, set())])
def test_parse_lines(spec: str | None, lines: set[int]) -> None:
    assert views.parse_lines(spec) == lines


def test_parse_lines_caps_a_huge_range() -> None:
    assert len(views.parse_lines("1-999999999")) == 10_001


def test_section_body_stops_at_a_heading_of_the_same_level() -> None:
    text = "# T\n\n## Current Focus\n\n- a\n### sub\n- b\n\n## Next\n- c\n"
    assert views.section_body(text, "current focus") == (3, "- a\n### sub\n- b")
    assert views.section_body(text, "Missing") is None


def test_a_long_hit_shows_its_matched_lines_with_context_and_gaps() -> None:
    text = "\n".join(f"line {n}" for n in range(10, 30))
    hit = {"path": "a.md", "start_line": 10, "end_line": 29, "text": text, "score": 0.5, "match_lines": [12, 25]}
    (h,) = views.hits({"hits": [hit]}, "line")
    assert [line.number for line in h.lines] == [11, 12, 13, None, 24, 25, 26]
    assert [line.number for line in h.lines if line.matched] == [12, 25]
    assert h.href == "/file?path=a.md&hl=12%2C25#L12"


def test_hits_name_the_root_when_there_are_several() -> None:
    hit = {"root": "/r2", "path": "a.md", "start_line": 1, "end_line": 1, "text": "x", "score": 1.0, "match_lines": []}
    (h,) = views.hits({"hits": [hit], "roots": ["/r1", "/r2"]}, "x")
    assert h.where == "/r2/a.md:1-1" and h.href.startswith("/file?path=%2Fr2%2Fa.md")


def test_dashboard_backlog_progress_and_time_left() -> None:
    status = {"chunks": 200, "vectors": {"pending": 50, "per_s": 10.0, "eta_s": 65}, "fresh": False,
              "pending": 0, "reconciling": True, "roots": [{"path": "/r", "alive": False, "error": "gone"}],
              "last_error": "boom"}
    d = views.dashboard(status, {"namespaces": {"default": {"files": 1}}, "total": {"files": 1}})
    assert (d["vectors_done"], d["vectors_total"], d["eta"]) == (150, 200, "1 min 5 s")
    assert "10.0/s" in d["vectors_text"] and d["busy"] and not d["fresh"]
    assert ("daemon", "boom") in d["errors"] and ("/r", "gone") in d["errors"]


def test_audit_summary_counts_per_session_with_repeats() -> None:
    entries = [{"session": {"kind": "direct", "peer": "bob"}, "action": "remember", "decision": "denied", "count": 4},
               {"session": {"kind": "direct", "peer": "bob"}, "action": "remember", "decision": "appended"},
               {"session": {"kind": "owner"}, "action": "forget", "decision": "removed"}]
    assert views.audit_summary(entries) == [
        ("direct:bob", [("remember denied", 4), ("remember appended", 1)]),
        ("owner", [("forget removed", 1)]),
    ]


def test_highlight_marks_whole_content_words_and_cjk_anywhere() -> None:
    assert str(views.highlight("we undo the deploys", views.query_words("do we deploy"))) == \
        "we undo the <mark>deploys</mark>"
    # "the" is no content word (the keyword search drops it): never marked, let alone inside "they"/"there"
    assert str(views.highlight("They said there is the cache", views.query_words("the cache"))) == \
        "They said there is the <mark>cache</mark>"
    assert str(views.highlight("theme of the day", views.query_words("them"))) == "theme of the day"
    assert views.query_words("the of and") is None
    cjk = views.highlight("我们周四部署生产环境", views.query_words("部署"))
    assert str(cjk) == "我们周四<mark>部署</mark>生产环境"
