"""Reading ``config.yaml``: ``${VAR}`` from the environment, bounds on its size, and one-line
errors that name the path of a bad key."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from chazbot.config.base import local_embedder_installed
from chazbot.config.root import Config
from chazbot.errors import ConfigError

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
MAX_VALUES = 100_000  # mappings, lists and scalars, YAML aliases counted each time used
MAX_DEPTH = 64  # nine levels of nine aliases expand to 3.9e8 values: the start hung on them


def check_size(data: Any, source: str) -> None:
    """ConfigError (one line) past ``MAX_VALUES`` values or ``MAX_DEPTH`` levels (and no later)."""
    seen, stack = 0, [(data, 0)]
    while stack:
        value, depth = stack.pop()
        seen += 1
        if seen > MAX_VALUES:
            raise ConfigError(f"{source}: more than {MAX_VALUES:,} values (YAML aliases?)")
        if depth > MAX_DEPTH:
            raise ConfigError(f"{source}: nested more than {MAX_DEPTH} levels deep")
        if isinstance(value, dict | list):
            items = value.values() if isinstance(value, dict) else value
            stack.extend((v, depth + 1) for v in items)


def expand_env(value: Any, path: str = "") -> Any:
    """Replace ``${VAR}`` (or ``${VAR:-default}``) in every string of a YAML tree."""
    if isinstance(value, dict):
        return {k: expand_env(v, f"{path}.{k}" if path else str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [expand_env(v, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, str):

        def sub(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name in os.environ:
                return os.environ[name]
            if default is not None:
                return default
            raise ConfigError(f"{path}: environment variable {name} is not set")

        return _ENV_REF.sub(sub, value)
    return value


def _path(loc: tuple[int | str, ...]) -> str:
    """``("agents", 0, "foo")`` → ``agents[0].foo``, the form ``expand_env`` names paths in."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text or "(top level)"


def _error_line(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = _path(err["loc"])
    if err["type"] == "extra_forbidden":
        return f"{loc}: unknown key"
    msg = err["msg"].removeprefix("Value error, ")
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{loc}: {msg}{more}"


def parse_config(data: Any, source: str = "config", local_embedder: bool | None = None) -> Config:
    """Validate a YAML tree (already loaded) into a Config; errors are one line.

    A config file (or no file) that leaves ``embedding`` out gets the local embedder when it
    is installed (``local_embedder``: whether it is, None: look), so recall is hybrid by
    default; ``embedding: null`` keeps BM25 only. A ``Config`` built in Python means exactly
    what it says.
    """
    if local_embedder is None:
        local_embedder = local_embedder_installed()
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of keys")
    check_size(data, source)
    if "embedding" not in data and local_embedder:
        data = {**data, "embedding": {"backend": "local"}}
    try:
        return Config.model_validate(expand_env(data))
    except ConfigError as exc:  # a missing ${VAR}: say which file
        raise ConfigError(f"{source}: {exc}") from exc
    except ValidationError as exc:
        raise ConfigError(f"{source}: {_error_line(exc)}") from exc


def load_config(path: str | Path | None = None) -> Config:
    """Load the config: explicit path, else ``$CHAZBOT_CONFIG``, else ``./config.yaml``.

    An explicit path that does not exist is an error; the default path missing means defaults.
    """
    explicit = path is not None or "CHAZBOT_CONFIG" in os.environ
    file = Path(path if path is not None else os.environ.get("CHAZBOT_CONFIG", "config.yaml"))
    if not file.exists():
        if explicit:
            raise ConfigError(f"config file {file} does not exist")
        return parse_config({}, "defaults")
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ConfigError(f"{file}:{where}: {problem}") from exc
    except OSError as exc:
        raise ConfigError(f"cannot read {file}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{file}: not UTF-8 text (byte {exc.start})") from exc
    except RecursionError:
        raise ConfigError(f"{file}: nested more than {MAX_DEPTH} levels deep") from None
    return parse_config(data, str(file))
