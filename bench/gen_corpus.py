#!/usr/bin/env python3
"""Generate a realistic memory folder of about N chunks, deterministic by seed.

    python bench/gen_corpus.py OUT_DIR --chunks 10000 [--seed 0]

Layout (what an agent's memory looks like after years of use):

* ``memory/YYYY-MM-DD.md``: one daily file per day from 2019-01-01, 2–8 sections;
* ``MEMORY.md``: long-lived facts, a handful of sections;
* ``peers/<ID>/profile.md`` and ``peers/<ID>/YYYY-MM.md``: notes about one person;
* ``groups/<ID>/YYYY-MM-DD.md``: a shared channel's daily log.

About a quarter of the sections are Chinese; sections mix bullet lists, prose and
fenced code. Each section is one ``##`` heading with 80–300 tokens, and the chunker
hard-cuts at headings, so one section is one chunk (of the default 400-token
windows): ``--chunks`` sets the number of sections and the real chunk count comes
out within a few percent. Same seed and count → byte-identical files.
"""

from __future__ import annotations

import argparse
import datetime
import random
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import _DAYS, _FACTS, _PEOPLE, _THINGS, note_line

_ZH_THINGS = ["部署脚本", "缓存层", "账单导出", "搜索索引", "持续集成流水线", "入职文档", "备份任务", "接口网关",
              "监控面板", "移动应用", "预发布数据库", "发布说明", "认证服务", "夜间报表"]
_ZH_LINES = ["- 决定重写{t}，因为上周超时了两次。", "- {p} 问到{t}；告诉他它每晚两点运行。",
             "- 待办：在周五之前迁移{t}（{p} 负责）。", "- 了解到：{t}的配置在 /etc/app/config.toml 里。",
             "- 和 {p} 开会讨论{t}，下周跟进。", "{p} 觉得{t}太复杂了，建议先写文档再改代码。"]
_ZH_HEADINGS = ["会议记录", "待办事项", "决定", "问题排查", "学到的东西", "用户偏好"]
_HEADINGS = ["Standup", "Decisions", "Debugging", "Follow-ups", "Learned", "Preferences", "Incident", "Ideas",
             "Review notes", "Plans"]
_CODE = ["```bash\nsystemctl --user restart memoryd\njournalctl --user -u memoryd -n 50\n```",
         "```python\nresult = client.call(\"search\", {\"query\": q, \"k\": 8})\nprint(result[\"hits\"][0])\n```",
         "```sql\nSELECT count(*) FROM chunks WHERE file_id = ?;\n```",
         "```toml\n[search]\nk = 8\nindex_type = \"auto\"\n```"]
START = datetime.date(2019, 1, 1)


@dataclass
class CorpusInfo:
    """What :func:`generate` wrote: file and section counts (sections ≈ chunks) and bytes."""

    files: int = 0
    sections: int = 0
    bytes: int = 0


def section(rnd: random.Random) -> str:
    """One ``##`` section: English or Chinese, list or prose, sometimes a code fence."""
    if rnd.random() < 0.25:
        head = f"## {rnd.choice(_ZH_HEADINGS)}"
        lines = [rnd.choice(_ZH_LINES).format(t=rnd.choice(_ZH_THINGS), p=rnd.choice(_PEOPLE))
                 for _ in range(rnd.randint(3, 9))]
    else:
        head = f"## {rnd.choice(_HEADINGS)}: {rnd.choice(_THINGS)}"
        lines = [note_line(rnd) for _ in range(rnd.randint(3, 9))]
        if rnd.random() < 0.3:
            lines.insert(0, f"{rnd.choice(_PEOPLE)} said {rnd.choice(_THINGS)} {rnd.choice(_FACTS)}, "
                            f"so we agreed to revisit it on {rnd.choice(_DAYS)}.\n")
    if rnd.random() < 0.15:
        lines += ["", rnd.choice(_CODE)]
    return "\n".join([head, "", *lines])


def write_file(path: Path, title: str, rnd: random.Random, n_sections: int, info: CorpusInfo) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "\n\n".join([f"# {title}", *(section(rnd) for _ in range(n_sections))]) + "\n"
    data = text.encode("utf-8")
    path.write_bytes(data)
    info.files += 1
    info.sections += n_sections
    info.bytes += len(data)


def generate(root: Path, chunks: int, seed: int = 0) -> CorpusInfo:
    """Write about ``chunks`` sections under ``root`` (which may exist; files are overwritten)."""
    rnd = random.Random(seed)
    info = CorpusInfo()
    n_peers, n_groups = max(2, chunks // 2000), max(1, chunks // 5000)
    write_file(root / "MEMORY.md", "Memory", rnd, min(8, max(1, chunks // 100)), info)
    day = 0
    while info.sections < chunks:
        left = chunks - info.sections
        n = min(left, rnd.randint(2, 8))
        pick = rnd.random()
        date = START + datetime.timedelta(days=day)
        if pick < 0.65:
            write_file(root / "memory" / f"{date.isoformat()}.md", date.isoformat(), rnd, n, info)
            day += 1
        elif pick < 0.85:
            peer = f"peer-{rnd.randrange(n_peers):04d}"
            name = "profile.md" if rnd.random() < 0.1 else f"{date:%Y-%m}-{rnd.randrange(10**6):06d}.md"
            write_file(root / "peers" / peer / name, f"{peer} ({rnd.choice(_PEOPLE)})", rnd, n, info)
        else:
            group = f"group-{rnd.randrange(n_groups):03d}"
            name = f"{date.isoformat()}-{rnd.randrange(10**6):06d}.md"
            write_file(root / "groups" / group / name, f"{group} log {date.isoformat()}", rnd, n, info)
    return info


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--chunks", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    info = generate(args.out, args.chunks, args.seed)
    print(f"{info.files} files, {info.sections} sections, {info.bytes / 1e6:.1f} MB in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
