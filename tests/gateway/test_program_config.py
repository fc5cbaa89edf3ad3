"""A bad `agent.program`: one `config error:` line naming it, exit 2, before Ray or vLLM start (nothing written)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from loop_agents.errors import ConfigError
from loop_agents.gateway.program import check_program, parse_program

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("program", "line"),
    [
        (
            "no_such_package.agent:run",
            "config error: agent.program='no_such_package.agent:run': module 'no_such_package.agent' does not "
            "import (ModuleNotFoundError: No module named 'no_such_package')",
        ),
        (
            "tests.gateway.programs:__doc__",
            "config error: agent.program='tests.gateway.programs:__doc__': tests.gateway.programs:__doc__ is not "
            "callable (a str)",
        ),
    ],
)
def test_train_refuses_a_bad_program_in_one_line(program: str, line: str, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "loop_agents.train",
            "experiment=demo",
            f"agent.program={program}",
            f"run.dir={run_dir}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip().splitlines() == [line]
    assert not run_dir.exists()  # no model built, no Ray, no vLLM


@pytest.mark.parametrize(
    ("program", "names"),
    [
        ("tests.gateway.programs:no_such_function", "has no attribute 'no_such_function'"),
        ("tests.gateway.programs:openai_tool_loop.missing", "has no attribute 'openai_tool_loop.missing'"),
        ("no-such-agent-binary --flag", "executable 'no-such-agent-binary' is on PATH"),
        ("python 'unclosed", "is not a command line"),
    ],
)
def test_check_program_names_what_is_wrong(program: str, names: str) -> None:
    with pytest.raises(ConfigError) as raised:
        check_program(program)
    message = str(raised.value)
    assert message.startswith(f"agent.program={program!r}") and names in message and "\n" not in message


def test_good_programs_pass_and_empty_is_the_in_process_agent() -> None:
    check_program("tests.gateway.programs:openai_tool_loop")
    check_program(f"{sys.executable} -c pass")
    assert parse_program("") is None and parse_program("  ") is None
    assert parse_program("tests.gateway.programs:hangs").kind == "callable"
    assert parse_program("python agent.py --fast").argv == ("python", "agent.py", "--fast")


def test_a_program_that_prompts_in_text_gets_a_text_warm_start(tiny_model_dir: str) -> None:
    """`agent.program_prompts=text`: the warm start's demonstrations are text actions with the text agent's
    observations (unquoted), as the program will prompt the model; the default (tools) keeps tool calls."""
    from loop_agents.config.agent_kind import agent_kind
    from loop_agents.config.load import compose
    from loop_agents.config.validate import validate
    from loop_agents.orchestration.warm_model import warm_start_demonstrations

    program = "agent.program=benchmarks.gateway_programs:text_action_loop"
    text = compose(["experiment=demo", program, "agent.program_prompts=text", "env.options.demo_count=3"])
    tools = compose(["experiment=demo", program, "env.options.demo_count=3"])
    assert (agent_kind(text), agent_kind(tools)) == ("text", "tools")
    chat, demos = warm_start_demonstrations(text, tiny_model_dir)
    assert not chat.tools and all('"' not in m["content"] and "tool_call" not in m["content"]
                                  for d in demos for m in d.messages[1:])  # fmt: skip
    chat, demos = warm_start_demonstrations(tools, tiny_model_dir)
    assert chat.tools and demos[0].messages[2]["content"].startswith("<tool_call>")
    with pytest.raises(
        ConfigError, match=r"^agent.program_prompts='json' is not allowed; choose one of: text, tools$"
    ):
        validate(compose(["experiment=demo", program, "agent.program_prompts=json"]))
