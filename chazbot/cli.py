"""The ``chazbot`` command line.

A user error prints one line on stderr (``chazbot: error: …``), never a traceback. Exit
codes: 0 ok, 1 the command failed, 2 usage error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from chazbot import __version__
from chazbot.config import Config, load_config
from chazbot.errors import ChazError, InputError

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

DESCRIPTION = """\
chazbot: a self-hosted Matrix agent bot with signed, shareable, persistent memory.

commands:
  run          run the service: Matrix bot, sync server, health and metrics endpoints
  chat         chat with an agent in the terminal (/memory … and other commands work too)
  cmd          run one command, e.g. chazbot cmd "/memory list"
  tool         run one agent tool as the agent would, e.g. chazbot tool recall '{"query": "x"}'
               (chat, cmd and tool go through a running service; without one they open the
               state dir themselves, and a `run` started meanwhile refuses to start)
  reindex      backfill vectors for the configured embedding model (with progress)
  export       write a bank's (or agent's) visible memory as JSONL
  import-file  add memory rows from a JSONL file to a bank
  verify       re-check every stored entry's id, signature and authorisation, every index
               snapshot against the digest recorded when it was written, and the compiled
               code's cache directory (owner and mode)
  web-link     print a one-time sign-in link to the memory page, as the operator (admin)
  version      print the version
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, exit 2
        self.exit(EXIT_USAGE, f"{self.prog}: usage error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="chazbot",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", help="config file (default: $CHAZBOT_CONFIG or ./config.yaml)")
    parser.add_argument("--state-dir", help="override the config's state_dir")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.add_parser("run", help="run the service")
    p = sub.add_parser("chat", help="chat with an agent in the terminal")
    p.add_argument("--agent")
    p.add_argument("--session", default="terminal")
    p = sub.add_parser("cmd", help="run one command")
    p.add_argument("text", help='the command, e.g. "/memory list"')
    p.add_argument("--agent")
    p.add_argument("--session", default="cli")
    p = sub.add_parser("tool", help="run one agent tool")
    p.add_argument("name")
    p.add_argument("arguments", nargs="?", default="{}", help="JSON object")
    p.add_argument("--agent")
    p = sub.add_parser("reindex", help="backfill vectors for the active model")
    p.add_argument("bank", nargs="?", help="bank name (default: the agent's own memory)")
    p.add_argument("--agent")
    p = sub.add_parser("export", help="write visible memory rows as JSONL")
    p.add_argument("bank", help="bank or agent name")
    p.add_argument("file", nargs="?", help="output file (default: stdout)")
    p = sub.add_parser("import-file", help="add memory rows from JSONL")
    p.add_argument("bank")
    p.add_argument("file")
    sub.add_parser("verify", help="re-check every stored entry and the index state on disk")
    sub.add_parser("web-link", help="print a one-time sign-in link to the memory page")
    sub.add_parser("version", help="print the version")
    return parser


def _config(args: argparse.Namespace) -> Config:
    cfg = load_config(args.config)
    if args.state_dir:
        cfg = cfg.model_copy(update={"state_dir": Path(args.state_dir)})
    return cfg


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message (and the exception, one line)."""

    def format(self, record: logging.LogRecord) -> str:
        data = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            data["exception"] = repr(record.exc_info[1])
        return json.dumps(data, ensure_ascii=False)


def _setup_logging(cfg: Config | None) -> None:
    level = cfg.logging.level if cfg is not None else "WARNING"
    handler = logging.StreamHandler(sys.stderr)
    if cfg is not None and cfg.logging.format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler])
    # libraries chat at INFO about every request; keep one line per event of our own
    for noisy in ("aiohttp.access", "nio", "peewee"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLevelName(level)))


async def _verify(cfg: Config) -> int:
    from chazbot.ledger import Ledger
    from chazbot.ledger.statelock import StateLock
    from chazbot.peer import STATE_FILE

    path = Path(cfg.state_dir) / STATE_FILE
    if not path.exists():
        raise InputError(f"no state file at {path}")
    lock = StateLock.acquire(Path(cfg.state_dir), "verify")
    try:
        ledger = await Ledger.open(path)
        try:
            total = await ledger.count_entries()
            failures = await ledger.verify()
            snapshots, index = await _verify_index(ledger, Path(cfg.state_dir))
        finally:
            await ledger.close()
    finally:
        lock.release()
    for eid, reason in [*failures, *index]:
        print(f"FAIL {eid}: {reason}")
    print(f"{total} entries checked, {len(failures)} failed")
    print(f"{snapshots} index snapshots and the compiled-code cache checked, {len(index)} failed")
    return EXIT_FAILED if failures or index else EXIT_OK


async def _verify_index(ledger: Any, state_dir: Path) -> tuple[int, list[tuple[str, str]]]:
    """The index state on disk that a start would refuse: snapshots whose sha256 is not the
    one recorded when this peer wrote them, compiled code in the state dir, and a
    compiled-code cache others could write. How many snapshots, and the failures."""
    from chazbot.memory import bm25_kernel, snapshot
    from chazbot.memory.engine import SNAPSHOT_DIR

    failed: list[tuple[str, str]] = []
    snapshots = sorted((state_dir / SNAPSHOT_DIR).glob("*.npz"))
    for path in snapshots:
        shown = f"{SNAPSHOT_DIR}/{path.name}"
        recorded = await ledger.kv.get(snapshot.record_key(path))
        if recorded is None:
            failed.append((shown, "not written by this peer (no digest recorded): never loaded"))
        elif await asyncio.to_thread(snapshot.file_sha256, path) != recorded:
            failed.append((shown, "changed since it was written: never loaded"))
    if (state_dir / SNAPSHOT_DIR / "compiled").exists():
        failed.append(
            (f"{SNAPSHOT_DIR}/compiled", "compiled code in the state dir: never loaded, remove it")
        )
    cache = bm25_kernel.configured_cache_dir()
    problem = bm25_kernel.cache_dir_problem(cache) if cache.exists() else None
    if problem is not None:
        failed.append((f"compiled-code cache {cache}", f"{problem}: never loaded"))
    return len(snapshots), failed


async def _reindex(cfg: Config, bank: str | None, agent_name: str | None) -> int:
    from chazbot.peer import Peer

    peer = await Peer.open(cfg)
    try:
        agent = peer.agent(agent_name) if agent_name else next(iter(peer.agents.values()))
        _, db = await agent.memory.resolve(bank)

        def progress(p: Any) -> None:
            width = 30
            filled = width * p.done // max(p.total, 1)
            sys.stderr.write(
                f"\rreindex [{'#' * filled}{'.' * (width - filled)}] {p.done}/{p.total}"
            )
            sys.stderr.flush()

        total = await peer.memory.reindex(db, agent.key, progress)
        sys.stderr.write("\n")
        print(f"reindexed {total} rows for {peer.memory.model}")
    finally:
        await peer.close()
    return EXIT_OK


async def _tool(cfg: Config, name: str, arguments: str, agent_name: str | None) -> int:
    from chazbot.transports.control import ask, handle_request

    request = {"op": "tool", "name": name, "arguments": arguments, "agent": agent_name}
    reply = await ask(cfg, request, lambda peer: handle_request(peer, request))
    print(reply["text"])
    return EXIT_OK if reply["ok"] else EXIT_FAILED


async def _cmd(cfg: Config, text: str, agent: str | None, session: str) -> int:
    from chazbot.transports.control import ask, handle_request

    request = {"op": "cmd", "text": text, "agent": agent, "session": session}
    reply = await ask(cfg, request, lambda peer: handle_request(peer, request))
    print(reply["text"])
    if reply.get("usage_error"):
        return EXIT_USAGE
    return EXIT_OK if reply["ok"] else EXIT_FAILED


async def _resolve_db(peer: Any, ref: str) -> tuple[str, str]:
    from chazbot.ledger.encoding import is_content_id

    reg = peer.registry
    found = await reg.by_db(ref) if is_content_id(ref) else None
    found = found or await reg.get("bank", ref) or await reg.get("agent", ref)
    if found is None:
        raise InputError(f"no bank or agent {ref!r} on this peer")
    return found.name, found.db


async def _export(cfg: Config, ref: str, file: str | None) -> int:
    from chazbot.memory.transfer import export_lines
    from chazbot.peer import Peer

    peer = await Peer.open(cfg)
    try:
        _, db = await _resolve_db(peer, ref)
        lines = await export_lines(peer.memory, db)
    finally:
        await peer.close()
    text = "".join(line + "\n" for line in lines)
    if file:
        Path(file).write_text(text, encoding="utf-8")
        print(f"exported {len(lines)} rows to {file}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return EXIT_OK


async def _import_file(cfg: Config, ref: str, file: str) -> int:
    from chazbot.memory.banks import writer_key_for
    from chazbot.memory.transfer import import_lines
    from chazbot.peer import Peer

    try:
        lines = Path(file).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {file}: {exc}") from exc
    peer = await Peer.open(cfg)
    try:
        name, db = await _resolve_db(peer, ref)
        key = await writer_key_for(peer.ledger, peer.registry, db)
        total = sum(1 for line in lines if line.strip())

        def progress(done: int) -> None:
            sys.stderr.write(f"\rimport {name}: {done}/{total}")
            sys.stderr.flush()

        report = await import_lines(peer.memory, db, key, lines, progress)
    finally:
        await peer.close()
    sys.stderr.write("\n")
    for error in report.errors:
        print(error, file=sys.stderr)
    print(f"imported {report.written} rows into {name}; {report.batches_skipped} batches skipped")
    return EXIT_FAILED if report.errors else EXIT_OK


async def _run(cfg: Config, config_path: str | None) -> int:
    from chazbot.service import Service

    await Service(cfg, config_path).run_forever()
    return EXIT_OK


async def _chat(cfg: Config, agent: str | None, session: str) -> int:
    """Through the running service when there is one, else on the state opened here."""
    from chazbot.peer import Peer
    from chazbot.transports.control import ServiceChat, reach
    from chazbot.transports.terminal import chat_loop

    found = await reach(cfg, {"op": "hello", "agent": agent, "session": session}, role="chat")
    if not isinstance(found, Peer):
        if not found.get("ok"):
            raise InputError(str(found.get("text")))
        return await chat_loop(ServiceChat(cfg), agent, session)
    try:
        return await chat_loop(found, agent, session)
    finally:
        await found.close()


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command in (None, "version"):
        if args.command is None:
            parser.print_help()
            return EXIT_USAGE
        print(f"chazbot {__version__}")
        return EXIT_OK
    try:
        cfg = _config(args)
        _setup_logging(cfg)
        jobs: dict[str, Callable[[], Coroutine[Any, Any, int]]] = {
            "verify": lambda: _verify(cfg),
            "web-link": lambda: _cmd(cfg, "/web", None, "cli"),
            "reindex": lambda: _reindex(cfg, args.bank, args.agent),
            "tool": lambda: _tool(cfg, args.name, args.arguments, args.agent),
            "cmd": lambda: _cmd(cfg, args.text, args.agent, args.session),
            "export": lambda: _export(cfg, args.bank, args.file),
            "import-file": lambda: _import_file(cfg, args.bank, args.file),
            "run": lambda: _run(cfg, args.config),
            "chat": lambda: _chat(cfg, args.agent, args.session),
        }
        job = jobs[args.command]()
        return asyncio.run(job)
    except ChazError as exc:
        print(f"chazbot: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return 130


def run() -> None:
    sys.exit(main())


if __name__ == "__main__":
    run()
