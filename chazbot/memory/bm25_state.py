"""A BM25 postings layout as a snapshot and back: its vocabulary and trimmed arrays, with the
scoring parameters among the counters, checked on the way in so that a damaged or hostile
snapshot is refused before a search could walk outside the arrays.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
from numpy.typing import NDArray

from chazbot.errors import InputError
from chazbot.memory.bm25_postings import Postings, with_room
from chazbot.memory.bm25_tuning import DEFAULT_LAYOUT, LayoutTuning


def export_state(
    postings: Postings, k1: float, b: float
) -> tuple[list[str], dict[str, NDArray[Any]]]:
    """The vocabulary (term id order) and the arrays that make up the layout, trimmed,
    with the scoring parameters ``k1`` and ``b`` among the counters.

    ``from_state`` rebuilds an identical layout from them without tokenizing anything.
    """
    n_terms, n_slots, used, f_used = (
        len(postings.term_id),
        postings.n_slots,
        postings.p_used,
        postings.f_used,
    )
    arrays: dict[str, NDArray[Any]] = {
        "t_start": postings.t_start[:n_terms],
        "t_len": postings.t_len[:n_terms],
        "t_cap": postings.t_cap[:n_terms],
        "t_df": postings.t_df[:n_terms],
        "t_maxtf": postings.t_maxtf[:n_terms],
        "t_minratio": postings.t_minratio[:n_terms],
        "p_slot": postings.p_slot[:used],
        "p_tf": postings.p_tf[:used],
        "s_doc": postings.s_doc[:n_slots],
        "s_len": postings.s_len[:n_slots],
        "s_alive": postings.s_alive[:n_slots],
        "s_fwd": postings.s_fwd[:n_slots],
        "s_nterms": postings.s_nterms[:n_slots],
        "f_term": postings.f_term[:f_used],
        "counters": np.array(
            [postings.p_garbage, postings.p_dead, postings.total_len, k1 * 1e6, b * 1e6],
            np.int64,
        ),
    }
    return list(postings.term_id), arrays


def from_state(
    vocab: list[str], arrays: dict[str, NDArray[Any]], tuning: LayoutTuning = DEFAULT_LAYOUT
) -> tuple[Postings, float, float]:
    """The layout ``export_state`` described, and its ``k1`` and ``b`` (raises InputError
    if the parts disagree)."""
    counters = arrays["counters"]
    n_terms = len(vocab)
    _check_state(n_terms, arrays)
    index = Postings(tuning)
    term_id: defaultdict[str, int] = defaultdict()
    term_id.update(zip(vocab, range(n_terms), strict=True))
    term_id.default_factory = term_id.__len__
    index.term_id = term_id
    index.t_start = with_room(arrays["t_start"].astype(np.int64))
    index.t_len = with_room(arrays["t_len"].astype(np.int64))
    index.t_cap = with_room(arrays["t_cap"].astype(np.int64))
    index.t_df = with_room(arrays["t_df"].astype(np.int64))
    index.t_maxtf = with_room(arrays["t_maxtf"].astype(np.float64))
    minratio = arrays["t_minratio"].astype(np.float64)
    room = np.full(len(index.t_start) - n_terms, np.inf)
    index.t_minratio = np.concatenate((minratio, room))
    index.p_slot = with_room(arrays["p_slot"].astype(np.int32))
    p_tf = arrays["p_tf"]
    index.p_tf = with_room(p_tf if p_tf.dtype == np.int32 else p_tf.astype(np.uint16))
    index.p_used = len(arrays["p_slot"])
    index.p_garbage, index.p_dead, index.total_len = (int(c) for c in counters[:3])
    index.s_doc = with_room(arrays["s_doc"].astype(np.int64))
    index.s_len = with_room(arrays["s_len"].astype(np.float64))
    index.s_alive = with_room(arrays["s_alive"].astype(np.bool_))
    index.s_fwd = with_room(arrays["s_fwd"].astype(np.int64))
    index.s_nterms = with_room(arrays["s_nterms"].astype(np.int32))
    index.n_slots = n_slots = len(arrays["s_doc"])
    index.f_term = with_room(arrays["f_term"].astype(np.int32))
    index.f_used = len(arrays["f_term"])
    alive = np.flatnonzero(index.s_alive[:n_slots])
    index.slot_of = dict(zip(index.s_doc[alive].tolist(), alive.tolist(), strict=True))
    index.build_dense()
    return index, float(counters[3]) / 1e6, float(counters[4]) / 1e6


def _check_state(n_terms: int, arrays: dict[str, NDArray[Any]]) -> None:
    """Raise InputError unless ``export_state``'s arrays describe an index that searches can
    walk without leaving them (the compiled loop does not check bounds): array sizes, postings
    regions inside the pool, slots and term ids in range, statistics that divide safely."""
    n_slots, used, f_used = len(arrays["s_doc"]), len(arrays["p_slot"]), len(arrays["f_term"])
    sizes = {
        **dict.fromkeys(("t_start", "t_len", "t_cap", "t_df", "t_maxtf", "t_minratio"), n_terms),
        **dict.fromkeys(("s_len", "s_alive", "s_fwd", "s_nterms"), n_slots),
        "p_tf": used,
        "counters": 5,
    }
    if any(len(arrays[name]) != size for name, size in sizes.items()):
        raise InputError("index snapshot: array sizes do not match")
    start, length, cap = arrays["t_start"], arrays["t_len"], arrays["t_cap"]
    df, maxtf, fwd, nterms = arrays["t_df"], arrays["t_maxtf"], arrays["s_fwd"], arrays["s_nterms"]
    if (
        (start < 0).any()
        or (length < 0).any()
        or (length > cap).any()
        or (start + cap > used).any()
        or ((arrays["p_slot"] < 0) | (arrays["p_slot"] >= max(n_slots, 1))).any()
        or ((arrays["f_term"] < 0) | (arrays["f_term"] >= max(n_terms, 1))).any()
        or (fwd < 0).any()
        or (nterms < 0).any()
        or (fwd + nterms > f_used).any()
    ):
        raise InputError("index snapshot: postings out of range")
    if (
        (df < 0).any()
        or (df > length).any()
        or (maxtf[df > 0] < 1).any()
        or not (arrays["t_minratio"] >= 0).all()  # NaN fails too
        or not (arrays["s_len"] >= 0).all()
        or arrays["counters"][2] < 0  # total length
        or not 0 < arrays["counters"][3] <= 100e6  # k1 x 1e6
        or not 0 <= arrays["counters"][4] <= 1e6  # b x 1e6
    ):
        raise InputError("index snapshot: statistics out of range")
