"""The gateway: any agent program, trained token-exact through an OpenAI-compatible endpoint.

During rollouts (`agent.program=...`) each episode gets its own key on one local server (127.0.0.1):

    program ──POST /v1/chat/completions──▶ gateway ──token ids──▶ vLLM (the current adapter)
       │            (messages, tools)         │ renders with the learner's chat template, records prompt ids,
       │                                      │ sampled ids and log-probs, splices the ids of assistant messages
       │                                      │ the model produced back in (never re-tokenized text)
       └──POST /tools/<name>──▶ gateway ──ToolSpec.to_action──▶ Environment.step
                                              (the family's declared tools, nothing else)

The episode ends when the program returns (or crashes, hangs past `agent.timeout_s`, or runs out of its call or
context budget); it is scored by `Environment.evaluate()` and becomes one `Trajectory` (several segments when the
program rewrote its history). Files, one responsibility each:

    program.py        what `agent.program` names (a callable or a command) and its start-up check
    messages.py       OpenAI request messages -> chat-template messages; the key of an assistant message
    render.py         a conversation -> prompt ids, the recorded ids of the model's own messages spliced in
    recorder.py       one episode's calls -> its Trajectory (segments, loss mask, log-probs)
    completions.py    one chat-completion request: budgets, sampling, tool-call parsing, the OpenAI response
    streaming.py      `stream: true`: content deltas as the ids are sampled, then the rest of the reply
    tool_calls.py     one tool call of the program -> the environment's step (or an error result)
    mcp.py            the same tools over MCP (JSON-RPC of `POST /mcp`) for a command's MCP client
    session.py        one episode's state on the server: its key, recorder, budgets, why it ended
    server.py         the HTTP server (aiohttp): routes, Bearer keys, SSE streaming
    launch.py         start and stop one episode's program process (time limit, process group)
    run_callable.py   `python -m loop_agents.gateway.run_callable module:function`: a callable's process
    tool_functions.py the tools as Python functions inside a callable's process (HTTP to the gateway)
    episode.py        one whole episode: reset, session, program, evaluation -> Trajectory
    configured.py     a run's ProgramEpisodes from its config (`agent.program`), built once per rollout worker
"""
