"""#46 through whole turns: the stand-in model (``call <tool> <json>``) calls the built-ins and
a real MCP server's tools in ``peer.chat``; what it is shown is data (the system prompt says
so, the result is wrapped), its bad arguments come back as one line, a tool the agent may not
use is refused, the terminal asks y/n, and another room keeps answering while a tool hangs."""

from __future__ import annotations

import asyncio
import io
import json
import sys
from pathlib import Path

import chazbot
from chazbot.config import AgentConfig, ApprovalsConfig, Config, MCPServerConfig, ToolsConfig
from chazbot.memory.audience import room_audience
from chazbot.transports.terminal import chat_loop
from tests.support.paths import SUPPORT
from tests.support.standin_llm import StandinLLM, message_text

SERVER = str(SUPPORT / "mcp_demo_server.py")
ALICE = "@alice:example.org"


def config(tmp_path: Path, llm: StandinLLM, **tools: object) -> Config:
    return Config(
        state_dir=tmp_path,
        llm=llm.config(),
        agents=[
            AgentConfig(
                name="chaz",
                capture="off",
                allowed_tools=["remember", "recall", "get_time", "calculate", "demo__*"],
            )
        ],
        mcp_servers=[
            MCPServerConfig(
                name="demo", command=sys.executable, args=[SERVER], startup_timeout_s=60
            )
        ],
        tools=ToolsConfig.model_validate({"call_timeout_s": 4, **tools}),
        approvals=ApprovalsConfig(timeout_s=5),
    )


async def test_the_model_calls_built_ins_and_mcp_tools(
    tmp_path: Path, standin_llm: StandinLLM
) -> None:
    cfg = config(tmp_path, standin_llm, auto_approved_tools=["demo__add"])
    async with chazbot.open(tmp_path, cfg) as peer:
        await peer.tools.servers.wait_ready(60)
        turn = await peer.chat('call calculate {"expression": "17 % of 2,340"}')
        assert turn.tool_calls == [("calculate", True)]
        assert turn.text == (
            'Tool said: <tool_result tool="calculate">\n17 % of 2,340 = 397.8\n</tool_result>'
        )
        request = standin_llm.requests[0]
        offered = {t["function"]["name"] for t in request["tools"]}
        assert {"calculate", "get_time", "demo__add", "demo__echo", "remember"} <= offered
        assert "web_fetch" not in offered  # not in this agent's allowed_tools
        assert "data from outside" in message_text(request["messages"][0])
        turn = await peer.chat('call demo__add {"a": 40, "b": 2}')
        assert turn.tool_calls == [("demo__add", True)] and "\n42\n" in turn.text
        turn = await peer.chat('call demo__add {"a": "forty", "b": 2}')
        assert turn.tool_calls == [("demo__add", False)]
        assert "a: 'forty' is not of type 'integer'" in turn.text
        turn = await peer.chat('call web_fetch {"url": "http://127.0.0.1/"}')
        assert turn.tool_calls == [("web_fetch", False)] and "not allowed" in turn.text


async def test_an_operator_turn_without_a_way_to_ask_is_denied(
    tmp_path: Path, standin_llm: StandinLLM
) -> None:
    async with chazbot.open(tmp_path, config(tmp_path, standin_llm)) as peer:
        await peer.tools.servers.wait_ready(60)
        turn = await peer.chat('call demo__add {"a": 1, "b": 1}')  # no transport: nobody asked
        assert turn.tool_calls == [("demo__add", False)]
        assert "was not run: no one to ask" in turn.text


async def test_the_terminal_asks_y_or_n(tmp_path: Path, standin_llm: StandinLLM) -> None:
    async with chazbot.open(tmp_path, config(tmp_path, standin_llm)) as peer:
        await peer.tools.servers.wait_ready(60)
        out = io.StringIO()
        script = io.StringIO(
            'call demo__add {"a": 1, "b": 2}\ny\ncall demo__add {"a": 1, "b": 2}\nn\n/tools log\n'
        )
        assert await chat_loop(peer, None, "term", script, out) == 0
        said = out.getvalue()
        assert said.count("chaz wants to run demo__add") == 2, said
        assert "\n3\n</tool_result>" in said and "was not run: denied" in said, said
        assert "approved by terminal, ok" in said and "denied by terminal, not run" in said


async def test_other_rooms_answer_while_a_tool_hangs(
    tmp_path: Path, standin_llm: StandinLLM
) -> None:
    cfg = config(tmp_path, standin_llm, auto_approved_tools=["demo__*"])
    async with chazbot.open(tmp_path, cfg) as peer:
        await peer.tools.servers.wait_ready(60)
        hung = asyncio.create_task(
            peer.chat(
                'call demo__hang {"seconds": 60}',
                session="matrix:!a:example.org",
                sender=ALICE,
                audience=room_audience("matrix:!a:example.org", [ALICE], lambda _: False),
            )
        )
        await asyncio.sleep(0)
        started = asyncio.get_running_loop().time()
        other = await peer.chat("hello", session="matrix:!b:example.org", sender=ALICE)
        assert other.text == "You said: hello"
        assert asyncio.get_running_loop().time() - started < 3
        assert not hung.done()
        turn = await hung
        assert turn.tool_calls == [("demo__hang", False)] and "no answer within 4 s" in turn.text
        assert json.dumps(turn.text)  # one reply, the loop went on


async def test_chat_may_allow_built_ins_and_an_mcp_servers_tools(
    tmp_path: Path, standin_llm: StandinLLM
) -> None:
    async with chazbot.open(tmp_path, config(tmp_path, standin_llm)) as peer:
        made = await peer.command("/agent new gull allowed_tools=get_time,web_fetch,demo__*")
        assert made.ok, made.text
        assert peer.agent("gull").config.allowed_tools == ["get_time", "web_fetch", "demo__*"]
        for bad in ("fly", "demo__", "__x", "de__mo__x y"):
            refused = await peer.command(f"/agent set gull allowed_tools {bad}")
            assert not refused.ok and "no tool named" in refused.text, (bad, refused.text)
