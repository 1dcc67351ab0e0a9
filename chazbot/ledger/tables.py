"""Tables a feature owns in the state file: declared by the feature, migrated by the ledger.

A feature above the ledger (sync, the memory page's sign-ins, the Matrix login…) keeps
peer-local state in tables of its own. It declares them as one ``LocalTable``: a name and
ordered migration steps. The ledger applies the steps on its one connection and thread
(``Ledger.open(tables=…)`` for all of them at once, ``Ledger.table(…)`` on first use), each
step in its own transaction together with the feature's version row in ``local_tables``, so
a step is applied whole or not at all (a crash or an error in the middle rolls it back), and
a step already recorded never runs again. A file whose version of a feature is newer than the
code knows is refused, as the ledger's own schema is.

The ledger knows none of its features: it runs what they declare. ``verify`` and ``restore``
judge a file against the features they are given (``rebuild.foreign_objects``).
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from chazbot.errors import ConflictError, InputError

Step = str | Callable[[sqlite3.Connection], None]
"""One migration step: one SQL statement, or a function of the connection (say, to move
rows); it runs inside the step's transaction and must not commit."""

VERSIONS = "local_tables"
"""The ledger's table of each feature's schema version (made by schema migration 5)."""

_NAME = re.compile(r"[a-z][a-z0-9_.-]{0,63}")


@dataclass(frozen=True)
class LocalTable:
    """A feature's peer-local tables (never synced): its ``name`` (the key of its version),
    the SQL ``tables`` it owns (``Ledger.local`` may write them), and its migration ``steps``
    in order, never edited once released (a change is one more step).

    ``legacy``: how many of the steps a state file made before features owned their tables
    (schema version 4 and older) holds already, made by the ledger then. Such steps create
    with ``IF NOT EXISTS`` and exactly the old definition, so an old file's table (and its
    rows) is adopted as it is and a new file gets the same one.
    """

    name: str
    tables: tuple[str, ...]
    steps: tuple[Step, ...]
    legacy: int = 0

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise InputError(f"a local table's name is [a-z][a-z0-9_.-]*, not {self.name!r}")
        if not self.steps or not 0 <= self.legacy <= len(self.steps):
            raise InputError(f"local table {self.name}: steps, and legacy within them")

    @property
    def version(self) -> int:
        return len(self.steps)


def recorded(conn: sqlite3.Connection) -> dict[str, int]:
    """Each feature's recorded version in this file (none before schema migration 5)."""
    found = conn.execute("SELECT type FROM sqlite_master WHERE name = ?", (VERSIONS,)).fetchone()
    if found is None or found[0] != "table":
        return {}
    return {
        str(name): int(version)
        for name, version in conn.execute(f"SELECT name, version FROM {VERSIONS}")
        if isinstance(version, int)
    }


def migrate_table(conn: sqlite3.Connection, table: LocalTable, upto: int | None = None) -> int:
    """Apply ``table``'s steps this file has not recorded yet (up to ``upto``), each in its
    own transaction with its version row; refuse a file that holds a newer version. Returns
    the feature's version in the file. ``conn`` is in autocommit mode, in no transaction."""
    last = table.version if upto is None else upto
    have = recorded(conn).get(table.name, 0)
    if have > table.version:
        raise ConflictError(
            f"the state file holds {table.name} tables of version {have}, newer than this "
            f"chazbot knows ({table.version}); upgrade chazbot or use another state_dir"
        )
    for number in range(have + 1, last + 1):
        with transaction(conn):
            if recorded(conn).get(table.name, 0) >= number:  # another connection did it
                continue
            step = table.steps[number - 1]
            if isinstance(step, str):
                conn.execute(step)
            else:
                step(conn)
            conn.execute(
                f"INSERT OR REPLACE INTO {VERSIONS} (name, version) VALUES (?, ?)",
                (table.name, number),
            )
    return max(have, last)


def migrate_tables(conn: sqlite3.Connection, tables: Iterable[LocalTable]) -> None:
    for table in unique(tables):
        migrate_table(conn, table)


def unique(tables: Iterable[LocalTable]) -> list[LocalTable]:
    """``tables`` once each; a ConflictError if two different declarations share a name or
    claim the same SQL table."""
    by_name: dict[str, LocalTable] = {}
    owner: dict[str, str] = {}
    for table in tables:
        seen = by_name.get(table.name)
        if seen is not None:
            if seen != table:
                raise ConflictError(f"two different local tables are named {table.name}")
            continue
        by_name[table.name] = table
        for sql_table in table.tables:
            if owner.setdefault(sql_table, table.name) != table.name:
                raise ConflictError(f"table {sql_table} is claimed by {owner[sql_table]} too")
    return list(by_name.values())


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` … ``COMMIT``, or ``ROLLBACK`` on any error (autocommit connection)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def prefix_range(prefix: str) -> tuple[str, str]:
    """``lo <= key < hi`` holds exactly for the keys starting with ``prefix`` (non-empty)."""
    return prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)


__all__ = [
    "VERSIONS",
    "LocalTable",
    "Step",
    "migrate_table",
    "migrate_tables",
    "prefix_range",
    "recorded",
    "transaction",
    "unique",
]
