"""Fixed texts that calibrate the int8 query model's activation ranges (see :mod:`memoryd.indexer.embedding.e5_int8`).

Written for this purpose, not taken from any evaluation set: the kinds of
things memory files and questions about them hold — decisions, preferences,
dates, people, code, lists, headings — in English, Chinese and a few other
scripts. The quantiser only needs each input channel's typical magnitude;
those are a property of the model far more than of the text, but covering
the scripts and Markdown shapes that memoryd indexes keeps rare channels from
being under-estimated. Changing these texts changes the query model: bump
:data:`memoryd.indexer.embedding.e5_model.INT8_VERSION`.
"""

from __future__ import annotations

QUERIES = (
    "what did we decide about the database migration?",
    "when is the dentist appointment",
    "Which editor does the user prefer for Python?",
    "how do I restart the build server after a deploy",
    "what are Sam's plans for the summer holiday",
    "why did the benchmark get slower last week",
    "list of books recommended by Maria",
    "API key rotation policy",
    "我们上次讨论的项目截止日期是什么时候？",
    "用户喜欢喝什么咖啡",
    "How many people came to the meetup in March 2024?",
    "Mamma hade ont i ryggen — vad sa läkaren?",
    "プロジェクトの次の会議はいつですか",
    "what was the error in the nightly job on 2025-01-14",
)

PASSAGES = (
    "# Decisions\n\n- 2024-03-02: we keep PostgreSQL 15 for now; the migration to 16 waits until the"
    " extension `pg_partman` supports it.\n- Use `ruff` instead of flake8 + isort.",
    "The user prefers Neovim with the LazyVim distribution, dark themes, and 4-space indentation in"
    " Python. Never suggest Emacs keybindings.",
    "## 2023-07-18\n\nCaroline: I went to a support group for new parents yesterday, it helped a lot.\n"
    "Melanie: That's great! Did you meet anyone nice there?\nCaroline: Yes, two mums from my street.",
    "Meeting notes — infra sync, Tuesday 14:00\n\n1. Build server disk is 91% full; Ali will add a"
    " cleanup cron job.\n2. Deploys now go through `make release`, which tags and pushes.\n3. On-call"
    " swap: Priya takes the week of the 12th.",
    "```python\ndef rotate_keys(store, days=90):\n    for key in store.expiring(days):\n"
    "        store.replace(key)\n```\nKeys older than 90 days are rotated every Sunday at 03:00 UTC.",
    "Reading list from Maria: *The Left Hand of Darkness*, *Piranesi*, *A Memory Called Empire*;"
    " she said to skip the sequel.",
    "2024年5月20日 项目周会：前端重构推迟到六月底，后端先完成登录接口。用户反馈搜索太慢，需要加缓存。",
    "用户每天早上喝一杯燕麦拿铁，不加糖。周末喜欢去城西的那家咖啡馆看书。",
    "| metric | before | after |\n|---|---|---|\n| p50 latency | 18 ms | 12 ms |\n| p99 latency |"
    " 95 ms | 40 ms |\n\nThe regression came from the ORM issuing one query per row.",
    "TODO: renew passport before the trip to Lisbon (flight on 2025-06-03, hotel booked near Alfama)."
    " Remember the adapter for EU sockets.",
    "Nightly job failed on 2025-01-14: `OSError: [Errno 28] No space left on device` while writing"
    " /var/cache/reports. Fixed by moving the cache to /srv.",
    "明日の会議は午前十時から。議題は予算とスケジュールの見直し。資料は共有フォルダにあります。",
    "Sam wants to hike the Pacific Crest Trail for three weeks in July and is looking for a lighter"
    " tent, ideally under 1.2 kg.",
    "> Note: the staging database is reset every night at 02:00; do not keep test data there.",
)
