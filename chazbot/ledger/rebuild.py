"""A state file checked against what its signed entries make: the check of ``verify`` and
``restore``.

Only the signed entries of a state file can vouch for themselves. Every other table of the
ledger is derived from them (``rows``: memory rows, refs and vectors; ``fields`` and
``field_sets``; ``auth``; ``tips``; the entries' own columns beside their bytes: database,
height, author, parents, soft-failed, auth heads), and SQLite runs whatever else the file's
schema holds (a trigger on ``rows`` fires inside the ledger's next write). Someone who can
write the file or a backup of it, but cannot sign, can change all of that and leave every
entry intact. So a file is trusted only when

1. its schema is chazbot's, object for object: the tables, indexes and nothing else that the
   migrations make (``schema.migrate`` run on an empty database up to the file's version,
   and the steps of each feature's own tables up to the version the file records for it,
   ``ledger/tables.py``: the caller names the features it knows); no trigger, view, extra
   table or extra index, and no definition changed;
2. every entry's id, signature and authorisation hold (replayed into an empty in-memory
   ledger, ``LedgerCore.ingest``, as it was stored: soft-failed entries kept);
3. its derived tables are, row for row, what that replay made (compared in key order, one
   pass over each side; JSON values compared in canonical form, so ``true`` and ``1`` differ),
   and its row numbers follow its entries' order, as the ledger assigns them.

Peer-local tables (keys, the registry, ``local_kv``, the features' own tables) derive from
no entry: they are checked for their schema only.

The checks run on a connection of their own inside one read transaction, so a file in use
by its owner is checked as of one moment while the owner goes on writing. Standard library
only, like the rest of the ledger.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from chazbot.errors import IntegrityError
from chazbot.ledger.core import LedgerCore
from chazbot.ledger.entry import Entry
from chazbot.ledger.schema import LEGACY_VERSION, MIGRATIONS, migrate
from chazbot.ledger.tables import LocalTable, recorded

MAX_LISTED = 20
"""Differences named per table; the rest are counted."""

Failure = tuple[str, str]


@dataclass
class FileCheck:
    """What ``check`` found: each list holds (what, why) pairs for a person."""

    entries: int = 0
    foreign: list[Failure] = field(default_factory=list)
    """SQLite objects that are not chazbot's schema (or a schema version it cannot judge)."""
    failed_entries: list[Failure] = field(default_factory=list)
    derived: list[Failure] = field(default_factory=list)
    """Derived rows that differ from what the signed entries make."""

    @property
    def failures(self) -> list[Failure]:
        return [*self.foreign, *self.failed_entries, *self.derived]

    @property
    def ok(self) -> bool:
        return not self.failures


def shown(text: str, limit: int = 120) -> str:
    """A name read from the file, safe on one line of output (its choice is the attacker's)."""
    if text.isprintable() and len(text) <= limit:
        return text
    return repr(text[:limit])[1:-1] + ("…" if len(text) > limit else "")


def harden(conn: sqlite3.Connection) -> None:
    """Settings for reading a file that may be hostile: no functions run from its schema."""
    conn.execute("PRAGMA trusted_schema=OFF")


def schema_version(conn: sqlite3.Connection) -> int | None:
    """The file's schema version, or None when its version table is not a plain table."""
    found = conn.execute("SELECT type FROM sqlite_master WHERE name = 'schema_version'").fetchone()
    if found is None:
        return 0
    if found[0] != "table":
        return None
    row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
    return int(row[0]) if row and isinstance(row[0], int) else 0


def _objects(conn: sqlite3.Connection) -> dict[tuple[str, str], tuple[str, str]]:
    """(type, name) → (table, definition with whitespace runs as one space)."""
    found: dict[tuple[str, str], tuple[str, str]] = {}
    for kind, name, table, sql in conn.execute(
        "SELECT type, name, tbl_name, sql FROM sqlite_master"
    ):
        found[(str(kind), str(name))] = (str(table), " ".join(str(sql or "").split()))
    return found


def expected_objects(
    version: int, features: Sequence[tuple[LocalTable, int]] = ()
) -> dict[tuple[str, str], tuple[str, str]]:
    """The schema objects the migrations up to ``version`` make in an empty file, with those
    of each feature's steps up to its version."""
    scratch = sqlite3.connect(":memory:", isolation_level=None)
    try:
        migrate(scratch, MIGRATIONS[:version])
        for table, upto in features:
            for step in table.steps[:upto]:
                if isinstance(step, str):
                    scratch.execute(step)
                else:
                    step(scratch)
        return _objects(scratch)
    finally:
        scratch.close()


def foreign_objects(conn: sqlite3.Connection, tables: Sequence[LocalTable] = ()) -> list[Failure]:
    """SQLite objects of the file that chazbot's migrations (the ledger's, and those of the
    features in ``tables`` at the versions the file records) do not make, objects whose
    definition differs from theirs, and theirs that are missing. A feature's tables that a
    file of schema version 4 or older holds from the ledger (``LocalTable.legacy``) may be
    there, unrecorded, until the feature adopts them."""
    version = schema_version(conn)
    if version is None:
        return [("table schema_version", "not a plain table: not chazbot's schema")]
    if version > len(MIGRATIONS):
        return [
            (
                "schema_version",
                f"version {version} is newer than this chazbot knows ({len(MIGRATIONS)})",
            )
        ]
    known = {t.name: t for t in tables}
    features = recorded(conn) if version > LEGACY_VERSION else {}
    failures: list[Failure] = []
    for name, have_version in sorted(features.items()):
        feature = known.get(name)
        if feature is None:
            failures.append((shown(f"local tables {name}"), "no feature of this chazbot owns them"))
        elif have_version > feature.version:
            failures.append(
                (
                    shown(f"local tables {name}"),
                    f"version {have_version} is newer than this chazbot knows ({feature.version})",
                )
            )
    if failures:
        return failures
    mine = [(known[n], v) for n, v in sorted(features.items())]
    want = expected_objects(version, mine)
    legacy = [(t, t.legacy) for t in tables if t.name not in features and t.legacy]
    may = expected_objects(version, legacy) if legacy else {}
    have = _objects(conn)
    for kind, name in sorted(have):
        what = shown(f"{kind} {name}")
        expected = want.get((kind, name), may.get((kind, name)))
        if expected is None:
            failures.append((what, "not chazbot's schema: no migration makes it"))
        elif have[(kind, name)] != expected:
            failures.append((what, "its definition is not chazbot's schema"))
    for kind, name in sorted(set(want) - set(have)):
        failures.append((f"{kind} {name}", "missing: chazbot's schema has it"))
    return failures


def replay(conn: sqlite3.Connection) -> tuple[sqlite3.Connection, int, list[Failure]]:
    """Every entry of the file replayed, in its stored order, into an empty in-memory ledger
    (soft-failed ones kept, as they were stored): that ledger's connection (the caller closes
    it), the entry count, and the entries that fail their id, signature or authorisation."""
    stored = conn.execute("SELECT id, data FROM entries ORDER BY seq").fetchall()
    scratch = sqlite3.connect(":memory:", isolation_level=None)
    try:
        migrate(scratch)
        fresh = LedgerCore(scratch)
        failures: list[Failure] = []
        decoded: list[Entry] = []
        for eid, data in stored:
            try:
                if not isinstance(data, bytes):
                    raise IntegrityError("entry bytes are not a blob")
                decoded.append(Entry.decode(data, str(eid)))
            except IntegrityError as exc:
                failures.append((shown(str(eid)), str(exc)))
        result, _ = fresh.ingest(decoded, refuse_soft_failed=False)
        failures += result.rejected
        return scratch, len(stored), failures
    except BaseException:
        scratch.close()
        raise


# ---- derived tables against the replay -----------------------------------------------------


@dataclass(frozen=True)
class _Table:
    name: str
    query: str
    key: int  # the first ``key`` columns are the row's key (the query orders by them)
    columns: tuple[str, ...]  # names of the columns after the key
    json_columns: frozenset[str] = frozenset()


_DERIVED = (
    _Table(
        "entries",
        "SELECT e.id, e.db, e.height, e.author, e.ts, e.parents, e.is_data, e.soft_failed, "
        "e.data, h.db, h.members FROM entries e LEFT JOIN auth_heads h ON h.n = e.auth_set "
        "ORDER BY e.id",
        1,
        (
            *("db", "height", "author", "ts", "parents", "is_data", "soft_failed"),
            *("data", "auth heads' database", "auth heads"),
        ),
        frozenset({"auth heads"}),
    ),
    _Table(
        "rows",
        "SELECT row_id, db, store, entry_id, author, ts, height, hidden, data FROM rows "
        "ORDER BY row_id",
        1,
        ("db", "store", "entry_id", "author", "ts", "height", "hidden", "data"),
        frozenset({"data"}),
    ),
    _Table(
        "fields",
        "SELECT db, store, field, value, height, entry_id FROM fields ORDER BY db, store, field",
        3,
        ("value", "height", "entry_id"),
        frozenset({"value"}),
    ),
    _Table(
        "field_sets",
        "SELECT db, store, field, height, entry_id, value FROM field_sets "
        "ORDER BY db, store, field, height, entry_id",
        5,
        ("value",),
        frozenset({"value"}),
    ),
    _Table(
        "auth",
        "SELECT db, key, perm, prio, status, height, entry_id FROM auth ORDER BY db, key",
        2,
        ("perm", "prio", "status", "height", "entry_id"),
    ),
    _Table("tips", "SELECT db, id FROM tips ORDER BY db, id", 2, ()),
)


def _canonical_json(value: Any, sort_lists: bool) -> Any:
    if not isinstance(value, str):
        return ("not text", value)
    try:
        parsed = json.loads(value)
    except ValueError:
        return ("not JSON", value)
    if sort_lists and isinstance(parsed, list):
        parsed = sorted(parsed, key=str)
    return json.dumps(parsed, sort_keys=True, ensure_ascii=False)


def _normal(table: _Table, row: tuple[Any, ...]) -> tuple[Any, ...]:
    key, rest = row[: table.key], row[table.key :]
    values = tuple(
        _canonical_json(v, name == "auth heads") if name in table.json_columns else v
        for name, v in zip(table.columns, rest, strict=True)
    )
    return (*key, *values)


def _in_order(rows: Iterator[tuple[Any, ...]], table: _Table) -> Iterator[tuple[Any, ...]]:
    """The rows, checked to come in strictly increasing key order (SQLite orders text keys
    as Python does; a repeated key, or one of another type, is an altered table: TypeError)."""
    last: tuple[Any, ...] = ()
    width = table.key
    for row in rows:
        key = row[:width]
        if last and not last < key:
            raise IntegrityError("a repeated key")
        last = key
        yield row


def _shown(table: _Table, key: tuple[Any, ...]) -> str:
    return shown(f"{table.name} {' '.join(str(k) for k in key)}")


def _compare(table: _Table, have: sqlite3.Connection, want: sqlite3.Connection) -> list[Failure]:
    """Merge the file's rows of ``table`` with the replay's, both in key order."""
    found: list[Failure] = []
    mine = _in_order(iter(have.execute(table.query)), table)
    theirs = iter(want.execute(table.query))
    a, b = next(mine, None), next(theirs, None)
    try:
        while a is not None or b is not None:
            if b is None or (a is not None and a[: table.key] < b[: table.key]):
                assert a is not None
                found.append((_shown(table, a[: table.key]), "made by no signed entry"))
                a = next(mine, None)
            elif a is None or b[: table.key] < a[: table.key]:
                found.append((_shown(table, b[: table.key]), "missing: a signed entry makes it"))
                b = next(theirs, None)
            else:
                if a != b or list(map(type, a)) != list(map(type, b)):  # else canonical forms
                    x, y = _normal(table, a), _normal(table, b)
                    differ = [
                        name
                        for name, p, q in zip(
                            table.columns, x[table.key :], y[table.key :], strict=True
                        )
                        if p != q or type(p) is not type(q)
                    ]
                    if differ:
                        found.append(
                            (
                                _shown(table, a[: table.key]),
                                f"{', '.join(differ)} not what its signed entry makes",
                            )
                        )
                a, b = next(mine, None), next(theirs, None)
    except IntegrityError as exc:
        found.append((table.name, f"not in key order ({exc}): the table was altered"))
    except TypeError:
        found.append((table.name, "keys of mixed types: the table was altered"))
    return found


def _row_order(conn: sqlite3.Connection) -> list[Failure]:
    """Rows are numbered as the ledger stores them: entry by entry in stored order, each
    entry's stores in name order, each store's rows in operation order."""
    last: tuple[int, str, int] | None = None
    for n, seq, store, row_id in conn.execute(
        "SELECT r.n, e.seq, r.store, r.row_id FROM rows r "
        "LEFT JOIN entries e ON e.id = r.entry_id ORDER BY r.n"
    ):
        try:
            place = (int(seq), str(store), int(str(row_id).rsplit("/", 1)[1]))
        except (TypeError, ValueError, IndexError):
            return [(f"rows n={n}", "its entry or its place in it is not as stored")]
        if last is not None and not last < place:
            return [(f"rows n={n}", "numbered out of its entry's order: rows were renumbered")]
        last = place
    return []


def derived_differences(conn: sqlite3.Connection, rebuilt: sqlite3.Connection) -> list[Failure]:
    """Where the file's derived tables differ from ``rebuilt`` (a replay of its entries),
    at most ``MAX_LISTED`` named per table and the rest counted."""
    failures: list[Failure] = []
    for table in _DERIVED:
        found = _compare(table, conn, rebuilt)
        failures += found[:MAX_LISTED]
        if len(found) > MAX_LISTED:
            failures.append((table.name, f"and {len(found) - MAX_LISTED} more differences"))
    return failures + _row_order(conn)


def check(conn: sqlite3.Connection, tables: Sequence[LocalTable] = ()) -> FileCheck:
    """The whole check of the state file open on ``conn`` (see the module docstring), as of
    one moment: one read transaction. Stops after the schema when it holds objects that are
    not chazbot's (nothing else in the file is read then), and compares derived tables only
    when every entry passes (a failed entry is the finding then)."""
    outcome = FileCheck()
    began = not conn.in_transaction
    if began:
        conn.execute("BEGIN")
    try:
        integrity = conn.execute("PRAGMA integrity_check").fetchall()
        if integrity != [("ok",)]:
            outcome.foreign.append(("(file)", "; ".join(str(r[0]) for r in integrity[:5])))
            return outcome
        outcome.foreign += foreign_objects(conn, tables)
        if outcome.foreign:
            return outcome
        rebuilt, outcome.entries, outcome.failed_entries = replay(conn)
        try:
            if not outcome.failed_entries:
                outcome.derived = derived_differences(conn, rebuilt)
        finally:
            rebuilt.close()
        return outcome
    except sqlite3.DatabaseError as exc:
        outcome.foreign.append(("(file)", f"SQLite: {exc}"))
        return outcome
    finally:
        if began and conn.in_transaction:
            conn.execute("ROLLBACK")
