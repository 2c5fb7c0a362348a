"""``memoryd sites list`` and ``memoryd sites drop SITE``: the sites of a shared PostgreSQL database.

Runs in-process against ``storage.dsn`` (no daemon needed): whoever holds the DSN may read and
change every site's rows anyway. ``list`` shows each site with its roots, the process that holds
it (host, pid, data directory, as it recorded itself), whether it holds it *now* (its advisory
lock is granted) and when it was last heard from. ``drop`` removes a stopped site's rows (a
moved data directory's old copy, a retired machine): every other daemon stops finding them.
A live site is refused. Registered through :mod:`memoryd.daemon.client.cli_storage`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memoryd.daemon.client.cli_help import command


def add_parsers(sub: Any) -> None:
    p = command(sub, "sites", "list the sites of the shared PostgreSQL database, or drop a stopped one's rows",
                "memoryd sites list",
                "memoryd sites drop laptop:/home/me/.local/state/memoryd --dry-run",
                "memoryd sites drop old-vps",
                note="A site is one daemon's roots in the database (storage.site); rows of a site whose daemon"
                     " stopped stay searchable by every other daemon until dropped.")
    p.add_argument("--config", type=Path, help="config file (default: $XDG_CONFIG_HOME/memoryd/memoryd.toml)")
    p.add_argument("--data-dir", type=Path, help="this daemon's data directory (names this config's own site)")
    actions = p.add_subparsers(dest="sites_action", metavar="ACTION", required=True)
    ls = command(actions, "list", "every site with its roots, holder and last contact", "memoryd sites list --json")
    ls.add_argument("--json", action="store_true", help="machine-readable output")
    drop = command(actions, "drop", "remove every row of a stopped site (its files stay on its machine)",
                   "memoryd sites drop old-vps --dry-run")
    drop.add_argument("site", help="the site id, as `memoryd sites list` shows it")
    drop.add_argument("--dry-run", action="store_true", help="count what would be removed; change nothing")
    drop.add_argument("--json", action="store_true", help="machine-readable output")


def cmd_sites(args: argparse.Namespace) -> int:
    from memoryd.indexer import config as configmod
    from memoryd.indexer.errors import ConfigError
    from memoryd.indexer.storage import site_id
    from memoryd.indexer.storage.postgres import connect, sites
    from memoryd.indexer.storage.postgres.dsn import describe

    cfg = configmod.with_overrides(configmod.load(args.config), data_dir=args.data_dir)
    if not cfg.storage.dsn:
        raise ConfigError(f"memoryd sites needs a PostgreSQL DSN: set storage.dsn or {configmod.PG_DSN_ENV}")
    st = cfg.storage
    mine = site_id(st.site, cfg.data_dir)
    connect.check_schema(st.dsn, st.sslmode, st.connect_timeout_s)
    with connect.connect(st.dsn, st.sslmode, st.connect_timeout_s) as conn:
        if args.sites_action == "list":
            found = sites.list_sites(conn)
            if args.json:
                print(json.dumps({"database": describe(st.dsn), "this_site": mine,
                                  "sites": [s.to_json() for s in found]}, indent=2))
            else:
                print(render_sites(found, mine, describe(st.dsn)))
            return 0
        done = sites.drop_site(conn, args.site, dry_run=args.dry_run)
    if args.json:
        print(json.dumps(done.to_json()))
    elif done.roots == 0:
        print(f"no site {args.site!r} in {describe(st.dsn)}: nothing to drop", file=sys.stderr)
    else:
        verb = "would remove" if done.dry_run else "removed"
        print(f"{verb} site {done.site!r}: {done.roots} roots, {done.files} files, {done.chunks} chunks"
              f" (the shared embedding cache stays)", file=sys.stderr)
    return 0


def render_sites(found: list[Any], mine: str, where: str) -> str:
    """The site list in words, one block per site."""
    if not found:
        return f"no sites in {where}"
    lines = [f"sites in {where}:"]
    for s in found:
        state = "live" if s.live else "stopped"
        own = "  (this config's site)" if s.site == mine else ""
        lines.append(f"  {s.site}  {state}{own}")
        holder = f"host {s.host or '?'}, pid {s.pid if s.pid is not None else '?'}, data dir {s.data_dir or '?'}"
        last = s.to_json()["last_contact"] or "never"
        lines.append(f"    held by {holder}; last contact {last}" if s.live
                     else f"    last held by {holder}; last contact {last}")
        lines.extend(f"    root {r.path}: {r.files} files" for r in s.roots)
    return "\n".join(lines)


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"sites": cmd_sites}
