"""The JSONL imports the admin page runs in the background, by bank (``uploads`` takes the
file and starts one here).

Every line is checked before the first is written, as ``chazbot import-file`` does (the same
checks, ``memory.transfer.parse_all``): a bad line anywhere writes nothing and the page names
it. Rows are then written in the background (with the local embedder a row's vector takes tens of
milliseconds, so a big file outlasts a request): the bank's page shows how far it got, one
import runs per bank at a time, and stopping the service keeps the batches already written,
each whole (run it again: the same keys are overwritten, not doubled).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiohttp import web

from chazbot.memory.banks import writer_key_for
from chazbot.memory.transfer import ImportReport, Parsed, jsonl_lines, parse_all, write_parsed
from chazbot.operations import IMPORT_BATCH

if TYPE_CHECKING:
    from chazbot.ledger import KeyPair
    from chazbot.memory.banks import Hosted
    from chazbot.peer import Peer

log = logging.getLogger(__name__)

ERRORS_SHOWN = 5
MAX_LINES = 1_000_000
"""Lines a file may have (a row takes 20 bytes or more, so 16 MiB of rows has fewer): 16 MiB of
``ab`` lines took 1.7 s of the event loop to split, 530 MB, then a minute to refuse."""


def _check(data: bytes) -> tuple[list[Parsed], ImportReport]:
    """Every line of ``data`` parsed (UnicodeDecodeError when it is not UTF-8)."""
    return parse_all(jsonl_lines(data.decode("utf-8")))


@dataclass
class Progress:
    """One import running in the background: who started it, rows written of the total."""

    person: str
    total: int
    done: int = 0


class Imports:
    """The imports running on this page, by bank name (lower case)."""

    def __init__(self, peer: Peer) -> None:
        self.peer = peer
        self.running: dict[str, Progress] = {}
        self.tasks: set[asyncio.Task[None]] = set()

    def of(self, bank: str) -> Progress | None:
        return self.running.get(bank.lower())

    async def start(self, person: str, hosted: Hosted, data: bytes) -> tuple[bool, str]:
        """Check every line, then write them in the background for ``person`` (who started
        it, as the page names them); (ok, what to tell)."""
        bank = hosted.name
        if bank.lower() in self.running:
            return False, f"An import into {bank} is running; wait until it is done."
        progress = Progress(person, 0)
        self.running[bank.lower()] = progress  # held from here: a second upload waits
        started = False
        try:
            if data.count(b"\n") >= MAX_LINES:
                return False, f"The file has more than {MAX_LINES:,} lines; split it."
            try:
                parsed, report = await asyncio.to_thread(_check, data)  # off the loop, whole
            except UnicodeDecodeError as exc:
                return False, f"The file is not UTF-8 text (byte {exc.start})."
            if report.bad_lines:
                shown = "; ".join(report.errors[:ERRORS_SHOWN])
                more = report.bad_lines - min(report.bad_lines, ERRORS_SHOWN)
                extra = f"; and {more} more" if more else ""
                return False, (
                    f"Nothing imported: {report.bad_lines} bad line"
                    f"{'s' if report.bad_lines != 1 else ''} ({shown}{extra})."
                )
            if not parsed:
                return False, "The file has no rows."
            peer = self.peer  # ChazError: no key here writes the bank
            db, key = hosted.db, await writer_key_for(peer.ledger, peer.registry, hosted.db)
            progress.total = len(parsed)
            task = asyncio.create_task(self._write(person, bank, db, key, parsed, progress))
            started = True
        finally:
            if not started:
                self.running.pop(bank.lower(), None)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        rows = f"{len(parsed):,} row{'s' if len(parsed) != 1 else ''}"
        return True, f"Checked {rows}; importing into {bank} now."

    async def _write(
        self,
        person: str,
        bank: str,
        db: str,
        key: KeyPair,
        parsed: list[Parsed],
        progress: Progress,
    ) -> None:
        report = ImportReport()

        def advance(done: int) -> None:
            progress.done = done

        try:
            await write_parsed(self.peer.memory, db, key, parsed, report, advance, IMPORT_BATCH)
            log.info("web: %s imported %d rows into %s", person, report.written, bank)
        except asyncio.CancelledError:
            log.info(
                "web: import into %s stopped at %d of %d rows", bank, report.written, progress.total
            )
            raise
        except Exception as exc:  # a ledger error, say: the batches before it are kept
            log.warning(
                "web: import into %s by %s failed after %d rows: %s",
                bank,
                person,
                report.written,
                exc,
            )
        finally:
            self.running.pop(bank.lower(), None)

    async def stop(self, _app: web.Application | None = None) -> None:
        """Stop what runs (each batch already written stays, whole)."""
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
