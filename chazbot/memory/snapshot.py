"""A memory view saved to disk, so that loading a big bank does not rebuild its indexes.

A snapshot holds one database's view as of a local row number ``last_n``: the newest row per
key (tombstones included), the BM25 arrays with their vocabulary, and the vectors of one
embedding model. Loading one is reading a few numpy arrays; the rows the ledger stored after
``last_n`` are then applied on top, as live updates are. So a snapshot is never trusted for
more than it says: the ledger stays the source of truth, and a snapshot that does not match
it (another version, another model, more rows than the ledger holds, a damaged file) is
ignored and rebuilt. The engine deletes a database's snapshot when the ledger says rows of
that database became hidden or visible (``Applied.reset_dbs``).

Tied to the ledger: ``write`` returns the file's sha256, which the engine records in the
peer-local ``local_kv`` table (``record_key``) and deletes with the file; ``read`` is given
the recorded digest and loads nothing whose bytes differ. So a snapshot edited on disk,
copied in from another state dir, or put back from before a reset is never served (the
review's edited value "FORGED: … 0000-EVIL" was), and ``chazbot verify`` checks each one.

Format: one uncompressed ``.npz`` (numpy's zip of ``.npy`` arrays), read with
``allow_pickle=False``: no code runs on load. Strings are stored as one UTF-8 buffer and
per-string lengths in characters. Files live in ``<state_dir>/index/``, mode 0600, written
to a temporary name and renamed, so a crash leaves the old snapshot or the new one.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from chazbot.errors import InputError
from chazbot.memory.audience import Provenance
from chazbot.memory.bm25 import BM25Index
from chazbot.memory.rows import MemoryRow
from chazbot.memory.vectors import VectorIndex
from chazbot.memory.view import MemoryView

log = logging.getLogger(__name__)

VERSION = 4  # 2: each row's scope and provenance (SPEC §5c); 3: BM25 of indexed_tokens;
# 4: tokens of folded text (NFKC, no combining marks: tokenize.fold)
RECORD_PREFIX = "memory-snapshot/"
"""``local_kv`` keys of the snapshots' sha256, one per file (``record_key``)."""
_STR_FIELDS = ("row_id", "key", "value")
_SHARED_FIELDS = ("entry_id", "author", "scope", "origin")  # few distinct values: once each


@dataclass(frozen=True)
class SnapshotMeta:
    db: str
    model: str | None
    last_n: int  # rows of the ledger up to this local number are in the snapshot
    rows: int  # memory rows read up to last_n (all of them, superseded ones included)
    vectors: int  # vector rows of the model read up to last_n


def snapshot_path(directory: Path, db: str, model: str | None) -> Path:
    digest = hashlib.sha256(f"{db}\n{model or ''}".encode()).hexdigest()[:32]
    return directory / f"{digest}.npz"


def _pack(strings: list[str]) -> tuple[NDArray[np.uint8], NDArray[np.int64]]:
    lengths = np.fromiter(map(len, strings), np.int64, len(strings))
    data = np.frombuffer("".join(strings).encode("utf-8", "surrogatepass"), np.uint8)
    return data, lengths


def _unpack(data: NDArray[np.uint8], lengths: NDArray[np.int64]) -> list[str]:
    text = data.tobytes().decode("utf-8", "surrogatepass")
    ends = np.cumsum(lengths).tolist()
    if (ends[-1] if ends else 0) != len(text):
        raise InputError("snapshot: string lengths do not match the text")
    starts = [0, *ends[:-1]] if ends else []
    return [text[a:b] for a, b in zip(starts, ends, strict=True)]


def record_key(path: Path) -> str:
    """The ``local_kv`` key under which the sha256 of the snapshot at ``path`` is recorded."""
    return f"{RECORD_PREFIX}{path.name}"


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def write(path: Path, view: MemoryView, meta: SnapshotMeta) -> str:
    """Save ``view`` (held by nobody else while this runs) atomically at ``path``; the
    file's sha256, for the engine to record."""
    rows = list(view.latest.values())
    arrays: dict[str, NDArray[Any]] = {
        "meta": np.frombuffer(json.dumps({"version": VERSION, **meta.__dict__}).encode(), np.uint8),
        "r_doc": np.fromiter((r.doc for r in rows), np.int64, len(rows)),
        "r_ts": np.fromiter((r.ts for r in rows), np.int64, len(rows)),
        "r_height": np.fromiter((r.order[0] for r in rows), np.int64, len(rows)),
        "r_op": np.fromiter((r.order[2] for r in rows), np.int64, len(rows)),
        "r_forgotten": np.fromiter((r.forgotten for r in rows), np.bool_, len(rows)),
        "r_ntags": np.fromiter((len(r.tags) for r in rows), np.int64, len(rows)),
    }
    columns = {
        "row_id": [r.row_id for r in rows],
        "key": [r.key for r in rows],
        "value": [r.value for r in rows],
        "tags": [t for r in rows for t in r.tags],
    }
    shared = {
        "entry_id": [r.order[1] for r in rows],
        "author": [r.author for r in rows],
        "scope": [r.scope for r in rows],
        "origin": [json.dumps(r.origin.to_data()) if r.origin else "" for r in rows],
    }
    for name, strings in shared.items():
        distinct: dict[str, int] = {}
        arrays[f"i_{name}"] = np.fromiter(
            (distinct.setdefault(x, len(distinct)) for x in strings), np.int64, len(strings)
        )
        columns[name] = list(distinct)
    for name, strings in columns.items():
        arrays[f"s_{name}"], arrays[f"l_{name}"] = _pack(strings)
    vocab, bm25 = view.bm25.export_state()
    arrays["s_vocab"], arrays["l_vocab"] = _pack(vocab)
    arrays.update({f"b_{k}": v for k, v in bm25.items()})
    if view.vectors is not None:
        arrays.update({f"v_{k}": v for k, v in view.vectors.export_state().items()})
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        np.savez(out, **arrays)  # type: ignore[arg-type]
    digest = file_sha256(tmp)
    os.replace(tmp, path)
    return digest


def read(
    path: Path, db: str, model: str | None, sha256: str | None
) -> tuple[MemoryView, SnapshotMeta] | None:
    """The view saved at ``path`` and what it covers; None when there is no usable snapshot:
    none, damaged, of another format, database or model, or whose bytes are not the ones
    ``sha256`` (recorded when this peer wrote it) names."""
    if not path.exists():
        return None
    if sha256 is None:
        log.warning("ignoring the memory snapshot %s (not written by this peer)", path.name)
        return None
    try:
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() != sha256:
            log.warning("ignoring the memory snapshot %s (changed since it was written)", path.name)
            return None
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
        raw = json.loads(arrays["meta"].tobytes())
        if raw.pop("version", None) != VERSION:
            return None
        meta = SnapshotMeta(**raw)
        if meta.db != db or meta.model != model:
            return None
        return _view_of(arrays, meta), meta
    except (OSError, KeyError, TypeError, ValueError, InputError, zipfile.BadZipFile) as exc:
        log.warning("ignoring the memory snapshot %s (%s); rebuilding", path.name, exc)
        return None


def _view_of(arrays: dict[str, NDArray[Any]], meta: SnapshotMeta) -> MemoryView:
    strings = {name: _unpack(arrays[f"s_{name}"], arrays[f"l_{name}"]) for name in _STR_FIELDS}
    for name in _SHARED_FIELDS:
        distinct = _unpack(arrays[f"s_{name}"], arrays[f"l_{name}"])
        strings[name] = [distinct[i] for i in arrays[f"i_{name}"].tolist()]
    all_tags = _unpack(arrays["s_tags"], arrays["l_tags"])
    ntags = arrays["r_ntags"].tolist()
    ends = np.cumsum(ntags).tolist()
    if (ends[-1] if ends else 0) != len(all_tags):
        raise InputError("snapshot: tag counts do not match the tags")
    view = MemoryView(meta.model)
    rows = []
    columns = zip(
        arrays["r_doc"].tolist(),
        *(strings[name] for name in (*_STR_FIELDS, *_SHARED_FIELDS)),
        arrays["r_ts"].tolist(),
        arrays["r_height"].tolist(),
        arrays["r_op"].tolist(),
        arrays["r_forgotten"].tolist(),
        ntags,
        ends,
        strict=True,
    )
    for (
        doc,
        row_id,
        key,
        value,
        entry_id,
        author,
        scope,
        origin,
        ts,
        height,
        op,
        forgotten,
        nt,
        end,
    ) in columns:
        tags = tuple(all_tags[end - nt : end]) if nt else ()
        prov = Provenance.from_json(origin) if origin else None
        order = (height, entry_id, op)
        rows.append(
            MemoryRow(doc, row_id, key, value, tags, ts, order, author, forgotten, scope, prov)
        )
    bm25 = BM25Index.from_state(
        _unpack(arrays["s_vocab"], arrays["l_vocab"]),
        {k[2:]: v for k, v in arrays.items() if k.startswith("b_")},
    )
    vectors = (
        VectorIndex.from_state({k[2:]: v for k, v in arrays.items() if k.startswith("v_")})
        if "v_matrix" in arrays
        else None
    )
    view.restore(rows, bm25, vectors, meta.last_n)
    return view


__all__ = [
    "RECORD_PREFIX",
    "SnapshotMeta",
    "file_sha256",
    "read",
    "record_key",
    "snapshot_path",
    "write",
]
