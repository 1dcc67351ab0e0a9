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
from typing import TYPE_CHECKING, Any

from chazbot import __version__
from chazbot.config import Config, load_config
from chazbot.errors import ChazError, InputError

if TYPE_CHECKING:
    from chazbot.peer import Peer

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
  import-file  add memory rows from a JSONL file to a bank (a bad line: nothing is written)
  verify       re-check the state file (only chazbot's schema: no trigger, view or extra
               table; every entry's id, signature and authorisation; every table derived from
               the entries against a rebuild from them), every index snapshot against the
               digest recorded when it was written, and the compiled code's cache directory
               (reindex, export, import-file and verify also go through a running service;
               Ctrl-C stops them between two steps, leaving nothing half-written)
  backup       copy the whole state to one file while the service runs (owner-only: it
               holds the peer's secret keys)
  restore      put a backup in place of a stopped peer's state, after checking it as verify
               does (a backup that fails changes nothing)
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
    sub.add_parser("verify", help="re-check the state file, its entries and the index on disk")
    p = sub.add_parser("backup", help="copy the whole state to a file (service running or not)")
    p.add_argument("file", help="the backup file to write (must not exist)")
    p = sub.add_parser("restore", help="put a backup in place of a stopped peer's state")
    p.add_argument("file", help="a file written by chazbot backup")
    p.add_argument(
        "--force", action="store_true", help="move a state already there aside instead of refusing"
    )
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


async def _opened(cfg: Config, op: str, sink: Any, job: Callable[[Any], Any]) -> int:
    """``job(peer)`` on the state dir opened here (no service runs); Ctrl-C says what the
    interruption left, then goes on as an interrupt."""
    from chazbot import operations as ops
    from chazbot.peer import Peer

    peer = await Peer.open(cfg, role=op)
    try:
        return int(await job(peer))
    except asyncio.CancelledError:
        ops.interrupted(op, sink)
        raise
    finally:
        await peer.close()


async def _verify(cfg: Config) -> int:
    from chazbot import operations as ops
    from chazbot.ledger import Ledger
    from chazbot.ledger.statelock import StateLock
    from chazbot.peer import STATE_FILE
    from chazbot.transports.control_ops import operate
    from chazbot.transports.tables import FEATURE_TABLES

    sink = ops.TerminalSink()

    async def locally() -> int:
        state = Path(cfg.state_dir)
        if not (state / STATE_FILE).exists():
            raise InputError(f"no state file at {state / STATE_FILE}")
        lock = StateLock.acquire(state, "verify")
        try:
            ledger = await Ledger.open(state / STATE_FILE)
            try:
                return await ops.verify(ledger, state, sink, FEATURE_TABLES)
            finally:
                await ledger.close()
        finally:
            lock.release()

    return await operate(cfg, {"op": "verify"}, sink, locally)


async def _reindex(cfg: Config, bank: str | None, agent_name: str | None) -> int:
    from chazbot import operations as ops
    from chazbot.transports.control_ops import operate

    sink = ops.TerminalSink()
    request = {"op": "reindex", "bank": bank, "agent": agent_name}
    return await operate(
        cfg,
        request,
        sink,
        lambda: _opened(cfg, "reindex", sink, lambda p: ops.reindex(p, bank, agent_name, sink)),
    )


async def _tool(cfg: Config, name: str, arguments: str, agent_name: str | None) -> int:
    from chazbot.transports.control_client import ask

    request = {"op": "tool", "name": name, "arguments": arguments, "agent": agent_name}
    reply = await ask(cfg, request, lambda peer: _handle_here(peer, request))
    print(reply["text"])
    return EXIT_OK if reply["ok"] else EXIT_FAILED


async def _handle_here(peer: Peer, request: dict[str, Any]) -> dict[str, Any]:
    """``request`` answered on the peer opened here (no running service): the control
    server's code, loaded only then (a client of a running service needs none of it)."""
    from chazbot.transports.control import handle_request

    return await handle_request(peer, request)


async def _cmd(cfg: Config, text: str, agent: str | None, session: str) -> int:
    from chazbot.transports.control_client import ask

    request = {"op": "cmd", "text": text, "agent": agent, "session": session}
    reply = await ask(cfg, request, lambda peer: _handle_here(peer, request))
    print(reply["text"])
    if reply.get("usage_error"):
        return EXIT_USAGE
    return EXIT_OK if reply["ok"] else EXIT_FAILED


async def _export(cfg: Config, ref: str, file: str | None) -> int:
    """To ``file`` (written whole or not at all) or stdout."""
    from chazbot import operations as ops
    from chazbot.transports.control_ops import operate

    target = Path(file) if file else None
    partial = target.with_name(f".{target.name}.partial") if target else None
    out = partial.open("w", encoding="utf-8") if partial else None
    sink = ops.TerminalSink(data_to=out)
    code = ops.EXIT_FAILED
    try:
        code = await operate(
            cfg,
            {"op": "export", "bank": ref},
            sink,
            lambda: _opened(cfg, "export", sink, lambda p: ops.export(p, ref, sink)),
        )
    finally:
        if out is not None and partial is not None and target is not None:
            out.close()
            if code == ops.EXIT_OK:
                partial.replace(target)
            else:
                partial.unlink(missing_ok=True)
    if target is not None and code == ops.EXIT_OK:
        print(f"exported {sink.rows} rows to {target}", file=sys.stderr)
    return code


def read_jsonl(file: str) -> list[str]:
    """The lines of a UTF-8 file (``transfer.jsonl_lines``)."""
    from chazbot.memory.transfer import jsonl_lines

    try:
        text = Path(file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {file}: {exc}") from exc
    return jsonl_lines(text)


async def _import_file(cfg: Config, ref: str, file: str) -> int:
    from chazbot import operations as ops
    from chazbot.transports.control_ops import MAX_LINE, operate

    lines = read_jsonl(file)
    for number, line in enumerate(lines, 1):
        if len(line) > MAX_LINE // 6 and len(json.dumps(line)) > MAX_LINE:
            raise InputError(f"line {number}: longer than 1 MiB; nothing was imported")
    sink = ops.TerminalSink()
    request = {"op": "import", "bank": ref, "lines": len(lines)}
    return await operate(
        cfg,
        request,
        sink,
        lambda: _opened(cfg, "import", sink, lambda p: ops.import_rows(p, ref, lines, sink)),
        lines,
    )


async def _backup(cfg: Config, file: str) -> int:
    from chazbot import operations as ops
    from chazbot.ledger.statelock import StateLock
    from chazbot.peer import STATE_FILE
    from chazbot.transports.control_ops import operate

    target = Path(file).absolute()
    sink = ops.TerminalSink()
    state = Path(cfg.state_dir)

    async def locally() -> int:
        if not (state / STATE_FILE).exists():
            raise InputError(f"no state file at {state / STATE_FILE}")
        lock = StateLock.acquire(state, "backup")
        try:
            return await ops.backup(state, target, sink)
        except asyncio.CancelledError:
            ops.interrupted("backup", sink)
            raise
        finally:
            lock.release()

    return await operate(cfg, {"op": "backup", "file": str(target)}, sink, locally)


async def _restore(cfg: Config, file: str, force: bool) -> int:
    from chazbot import operations as ops
    from chazbot.transports.tables import FEATURE_TABLES

    return await ops.restore(
        Path(cfg.state_dir), Path(file), force, ops.TerminalSink(), FEATURE_TABLES
    )


async def _run(cfg: Config, config_path: str | None) -> int:
    from chazbot.service import Service

    await Service(cfg, config_path).run_forever()
    return EXIT_OK


async def _chat(cfg: Config, agent: str | None, session: str) -> int:
    """Through the running service when there is one, else on the state opened here."""
    from chazbot.peer import Peer
    from chazbot.transports.control_client import ServiceChat, reach
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
            "backup": lambda: _backup(cfg, args.file),
            "restore": lambda: _restore(cfg, args.file, args.force),
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
