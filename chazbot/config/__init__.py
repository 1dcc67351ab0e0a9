"""Configuration: pydantic models read from YAML, with ``${VAR}`` taken from the environment.

Every field is documented in ``config.yaml.example``. Unknown keys are an error that names
their path; a missing environment variable is an error that names the variable. No file at
all means the embedded defaults.

Split by concern; every name is imported from here (``from chazbot.config import Config``):

- ``base``: the strict frozen model every section is, default tool names, name patterns,
  whether optional extras are installed;
- ``zones``: the host's time zone (the default of ``timezone``);
- ``sections``: chat model, speech, media, embedding, Matrix, agents, logging, memory page;
- ``tools``: built-in tools and their approval policies, approvals, MCP servers;
- ``root``: ``Config``, the whole configuration of one peer;
- ``loading``: ``parse_config`` and ``load_config`` (environment, size bounds, errors).
"""

from __future__ import annotations

from chazbot.config.base import (
    LOCAL_DEFAULT_MODEL,
    MATRIX_SESSION_PREFIX,
    MEMORY_TOOLS,
    NAME_PATTERN,
    QUIET_BUILTINS,
    REMINDER_TOOLS,
    CaptureMode,
    e2e_installed,
    local_embedder_installed,
)
from chazbot.config.loading import (
    MAX_DEPTH,
    MAX_VALUES,
    check_size,
    expand_env,
    load_config,
    parse_config,
)
from chazbot.config.root import Config
from chazbot.config.sections import (
    AgentConfig,
    EmbeddingConfig,
    LLMConfig,
    LoggingConfig,
    MatrixConfig,
    MediaConfig,
    SpeechConfig,
    WebConfig,
)
from chazbot.config.tools import ApprovalPolicy, ApprovalsConfig, MCPServerConfig, ToolsConfig
from chazbot.config.zones import host_zone

__all__ = [
    "LOCAL_DEFAULT_MODEL",
    "MATRIX_SESSION_PREFIX",
    "MAX_DEPTH",
    "MAX_VALUES",
    "MEMORY_TOOLS",
    "NAME_PATTERN",
    "QUIET_BUILTINS",
    "REMINDER_TOOLS",
    "AgentConfig",
    "ApprovalPolicy",
    "ApprovalsConfig",
    "CaptureMode",
    "Config",
    "EmbeddingConfig",
    "LLMConfig",
    "LoggingConfig",
    "MCPServerConfig",
    "MatrixConfig",
    "MediaConfig",
    "SpeechConfig",
    "ToolsConfig",
    "WebConfig",
    "check_size",
    "e2e_installed",
    "expand_env",
    "host_zone",
    "load_config",
    "local_embedder_installed",
    "parse_config",
]
