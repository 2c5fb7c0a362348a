#!/usr/bin/env python3
"""A larger PostgreSQL corpus for ``bench/scale.py --reuse``, copied from a kept one: 1M chunks in minutes.

    python bench/pg_replicate.py DIR [--from 100000] [--copies 10] [--noise 0.05]
    python bench/scale.py --backend postgres --sizes 1000000 --reuse DIR --shared-buffers 5GB ...

Building 1M chunks through memoryd's write path would take hours here (100k: 22 minutes, one
transaction per file, the HNSW index updated row by row). This copies the kept corpus of
``bench/scale.py --keep DIR`` (database ``memoryd_scale_<from>`` on the private server under
``DIR/pg``) into database ``memoryd_scale_<from * copies>``: the original rows become the
measured site (``DIR/<size>/root``, a copy of the files, and ``DIR/<size>/data``), and
``copies - 1`` other sites (``replica-N``, no daemon) get the same files, chunks and postings,
each chunk's vector moved by uniform noise of standard deviation ``--noise`` per dimension (the
synthetic vectors' own spread; an exact duplicate would make a degenerate HNSW graph). The
postings and HNSW indexes are built once at the end, and BM25's corpus counts recounted.

What this is not: a corpus with ten times the vocabulary. Every site holds the same text, so a
keyword's postings are ten times as long (the keyword plan bounds that work as it would for
any common word) and every keyword hit has nine near-twins.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _pg import database_dsn, server_dsn

from memoryd.indexer.storage import site_id


def replicate(work: Path, source: int, copies: int, noise: float) -> dict[str, object]:
    size = source * copies
    src_dir, dst_dir = work / str(source), work / str(size)
    if not (src_dir / "built.json").exists():
        raise SystemExit(f"{src_dir}/built.json is missing: build it first with bench/scale.py --keep {work}")
    base = server_dsn(None, work)
    src_db, dst_db = f"memoryd_scale_{source}", f"memoryd_scale_{size}"
    t0 = time.perf_counter()
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{dst_db}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{dst_db}" TEMPLATE "{src_db}"')
    if dst_dir.exists():
        shutil.rmtree(dst_dir)
    shutil.copytree(src_dir / "root", dst_dir / "root")
    (dst_dir / "data").mkdir()
    half_width = noise * 3 ** 0.5  # uniform on [-w, w] has standard deviation w / sqrt(3)
    with psycopg.connect(database_dsn(base, dst_db), autocommit=True) as conn:
        step = _step(conn, "prepare")
        conn.execute("SET maintenance_work_mem = '4GB'")
        dim = int(conn.execute("SELECT vector_dims(embedding) FROM memoryd_chunks LIMIT 1").fetchone()[0])  # type: ignore[index]
        conn.execute(f"DROP INDEX IF EXISTS memoryd_chunks_hnsw_{dim}")
        conn.execute("ALTER TABLE memoryd_postings DROP CONSTRAINT memoryd_postings_pkey,"
                     " DROP CONSTRAINT memoryd_postings_chunk_id_fkey")
        conn.execute("DROP INDEX memoryd_postings_by_chunk")
        rid, max_file, max_chunk = conn.execute(
            "SELECT (SELECT min(id) FROM memoryd_roots), (SELECT max(id) FROM memoryd_files),"
            " (SELECT max(id) FROM memoryd_chunks)").fetchone()  # type: ignore[misc]
        conn.execute("UPDATE memoryd_roots SET site = %s, path = %s WHERE id = %s",
                     (site_id("", dst_dir / "data"), str(dst_dir / "root"), rid))
        for n in range(1, copies):
            step = _step(conn, f"copy {n}", step)
            new_root = conn.execute("INSERT INTO memoryd_roots (site, path) VALUES (%s, %s) RETURNING id",
                                    (f"replica-{n}", f"/replica-{n}/root")).fetchone()[0]  # type: ignore[index]
            with conn.transaction():
                conn.execute("INSERT INTO memoryd_files (id, root_id, path, size, mtime_ns, sha256, front_matter)"
                             " SELECT id + %s, %s, path, size, mtime_ns, sha256, front_matter FROM memoryd_files"
                             " WHERE id <= %s", (n * max_file, new_root, max_file))
                conn.execute(
                    "INSERT INTO memoryd_chunks (id, file_id, start_line, end_line, heading, text, sha256, embed_key,"
                    " terms, n_terms, embedding) SELECT c.id + %s, c.file_id + %s, c.start_line, c.end_line,"
                    " c.heading, c.text, c.sha256, c.embed_key, c.terms, c.n_terms, c.embedding + (SELECT"
                    " array_agg(((random() * 2 - 1) * %s)::real) FROM generate_series(1, %s + 0 * c.id))::vector"
                    " FROM memoryd_chunks c WHERE c.id <= %s",
                    (n * max_chunk, n * max_file, half_width, dim, max_chunk))
                conn.execute("INSERT INTO memoryd_postings (term, chunk_id, tf, dl) SELECT term, chunk_id + %s,"
                             " tf, dl FROM memoryd_postings WHERE chunk_id <= %s", (n * max_chunk, max_chunk))
        step = _step(conn, "sequences and counts", step)
        conn.execute("SELECT setval('memoryd_files_id_seq', (SELECT max(id) FROM memoryd_files))")
        conn.execute("SELECT setval('memoryd_chunks_id_seq', (SELECT max(id) FROM memoryd_chunks))")
        with conn.transaction():
            conn.execute("TRUNCATE memoryd_terms")
            conn.execute("INSERT INTO memoryd_terms SELECT term, count(*) FROM memoryd_postings GROUP BY term")
            conn.execute("UPDATE memoryd_totals SET (chunks, terms, writes) = (SELECT count(*),"
                         " coalesce(sum(n_terms), 0), 0 FROM memoryd_chunks)")
        step = _step(conn, "postings indexes", step)
        conn.execute("ALTER TABLE memoryd_postings ADD CONSTRAINT memoryd_postings_pkey"
                     " PRIMARY KEY (term, chunk_id) INCLUDE (tf, dl)")
        conn.execute("CREATE INDEX memoryd_postings_by_chunk ON memoryd_postings (chunk_id)")
        conn.execute("ALTER TABLE memoryd_postings ADD CONSTRAINT memoryd_postings_chunk_id_fkey"
                     " FOREIGN KEY (chunk_id) REFERENCES memoryd_chunks(id) ON DELETE CASCADE")
        step = _step(conn, "HNSW index", step)
        conn.execute(f"CREATE INDEX memoryd_chunks_hnsw_{dim} ON memoryd_chunks"
                     f" USING hnsw ((embedding::vector({dim})) vector_cosine_ops)")
        step = _step(conn, "vacuum analyze", step)
        conn.execute("VACUUM (ANALYZE) memoryd_chunks, memoryd_postings, memoryd_files, memoryd_terms")
        _step(conn, "done", step)
        chunks = int(conn.execute("SELECT count(*) FROM memoryd_chunks").fetchone()[0])  # type: ignore[index]
    seconds = round(time.perf_counter() - t0, 1)
    files = json.loads((src_dir / "built.json").read_text())["files"]
    # build_s: this copy's time, not a write-path build (see the module's docstring)
    (dst_dir / "built.json").write_text(json.dumps({"files": files, "build_s": seconds, "replicated_from": source,
                                                    "copies": copies, "noise": noise}))
    return {"size": size, "chunks": chunks, "seconds": seconds, "database": dst_db}


def _step(conn: psycopg.Connection, name: str, since: float | None = None) -> float:
    now = time.perf_counter()
    took = f" (previous step {now - since:.1f} s)" if since is not None else ""
    print(f"{time.strftime('%H:%M:%S')} {name}{took}", file=sys.stderr, flush=True)
    return now


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("work", type=Path, help="the --keep DIR of bench/scale.py --backend postgres")
    ap.add_argument("--from", dest="source", type=int, default=100_000, help="the kept size to copy")
    ap.add_argument("--copies", type=int, default=10, help="sites in the new database, the original included")
    ap.add_argument("--noise", type=float, default=0.05, help="per-dimension standard deviation added to copies")
    args = ap.parse_args()
    print(json.dumps(replicate(args.work, args.source, args.copies, args.noise)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
