from __future__ import annotations

from pathlib import Path

from memoryd.daemon.roots import RootMap


def test_locate_inside_outside_and_nested_roots(tmp_path: Path) -> None:
    a, inner = tmp_path / "a", tmp_path / "a" / "inner"
    inner.mkdir(parents=True)
    rm = RootMap([a, inner])
    assert rm.locate(a / "x.md") == (a, "x.md")
    assert rm.locate(inner / "y.md") == (inner, "y.md")  # the longest root wins
    assert rm.locate(tmp_path / "b" / "x.md") is None
    assert rm.locate(a) is None


def test_locate_through_symlinks_both_ways(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    assert RootMap([real]).locate(link / "n.md") == (real, "n.md")
    assert RootMap([link]).locate(real / "n.md") == (link, "n.md")
