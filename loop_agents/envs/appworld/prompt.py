"""The AppWorld ReAct prompt: framing, a worked demonstration, key instructions, the task.

Modelled on AppWorld's `react.txt` as used by ml-loop (docs/reference-ml-loop.md §3.1), with its bugs
fixed (§3.1, §8 item 10): the demo's passwords are a list of dicts and are looked up by account name
(not a list indexed with "password"), the access token is defined before it is used, no code fence
is indented, each demo turn writes exactly one code block, and demo observations have the same
`Output:` + fenced-block format the agent uses for real observations.
"""

from __future__ import annotations

import json
from typing import Any

DEFAULT_APP_DESCRIPTIONS: list[dict[str, str]] = [
    {"name": "api_docs", "description": "An app to search and explore API documentation."},
    {
        "name": "supervisor",
        "description": "An app to access supervisor's personal information, account credentials, addresses, payment cards, and manage the assigned task.",
    },
    {
        "name": "amazon",
        "description": "An online shopping platform to buy products and manage orders, returns, wish lists and reviews.",
    },
    {
        "name": "phone",
        "description": "An app to find and manage contact information for friends, family members, and coworkers, and send and receive text messages and voice messages.",
    },
    {
        "name": "file_system",
        "description": "A file system app to create, read, update and delete files and directories.",
    },
    {
        "name": "spotify",
        "description": "A music streaming app to stream songs and manage song, album and playlist libraries.",
    },
    {
        "name": "venmo",
        "description": "A social payment app to send, receive and request money to and from others.",
    },
    {"name": "gmail", "description": "An email app to draft, send, receive, and manage emails."},
    {"name": "splitwise", "description": "A bill splitting app to track and split expenses with people."},
    {"name": "simple_note", "description": "A note-taking app to create and manage notes."},
    {
        "name": "todoist",
        "description": "A task management app to manage todo lists and collaborate on them with others.",
    },
]

SYSTEM_PROMPT = (
    "You are a careful, autonomous assistant. You solve your supervisor's tasks by writing Python code "
    "that calls app APIs in a stateful Python REPL; you see the output of each code block before "
    "writing the next one."
)

_FRAMING = """I am your supervisor and you are a super intelligent AI Assistant whose job is to achieve my day-to-day tasks completely autonomously.

To do this, you will interact with apps (e.g., spotify, venmo) through their APIs on my behalf. We will have a multi-step conversation in a Python REPL: you write one Python code block, the REPL executes it and shows you the output, and based on it you write the next block, and so on, until the task is done.

Here are three APIs that tell you about all the others:

# The list of available apps.
print(apis.api_docs.show_app_descriptions())

# The list of APIs of one app, e.g. spotify.
print(apis.api_docs.show_api_descriptions(app_name='spotify'))

# The specification of one API, e.g. spotify's login API.
print(apis.api_docs.show_api_doc(app_name='spotify', api_name='login'))

Variables you define persist from one code block to the next. Let's start with an example task.

My name is: Joyce Weaver. My personal email is joyce-weav@gmail.com and phone number is 3155673041.
Task: How many playlists do I have in my Spotify playlist library?"""

_SPOTIFY_APIS = [
    {"name": "login", "description": "Login to your account."},
    {"name": "logout", "description": "Logout from your account."},
    {"name": "show_song", "description": "Get details of a specific song."},
    {
        "name": "show_playlist_library",
        "description": "Get a list of playlists in the user's playlist library.",
    },
    {"name": "show_playlist", "description": "Get detailed information about a specific playlist."},
    {"name": "create_playlist", "description": "Create a new playlist."},
]
_LOGIN_DOC = {
    "app_name": "spotify",
    "api_name": "login",
    "path": "/auth/token",
    "method": "POST",
    "description": "Login to your account.",
    "parameters": [
        {"name": "username", "type": "string", "required": True, "description": "Your account email."},
        {"name": "password", "type": "string", "required": True, "description": "Your account password."},
    ],
    "response_schemas": {
        "success": {"access_token": "string", "token_type": "string"},
        "failure": {"message": "string"},
    },
}
_SUPERVISOR_APIS = [
    {
        "name": "show_active_task",
        "description": "Show the currently active task assigned to you by the supervisor.",
    },
    {
        "name": "complete_task",
        "description": "Mark the currently active task as complete with the given answer.",
    },
    {"name": "show_profile", "description": "Show your supervisor's profile information."},
    {"name": "show_addresses", "description": "Show your supervisor's addresses."},
    {"name": "show_payment_cards", "description": "Show your supervisor's payment cards."},
    {"name": "show_account_passwords", "description": "Show your supervisor's app account passwords."},
]
_PASSWORDS = [
    {"account_name": "amazon", "password": "xU4%3Wq@9pZ"},
    {"account_name": "spotify", "password": "Kq8@rM2#fT1"},
    {"account_name": "venmo", "password": "b7!LpQ0zX3e"},
]
_LIBRARY_DOC = {
    "app_name": "spotify",
    "api_name": "show_playlist_library",
    "path": "/private_playlists",
    "method": "GET",
    "description": "Get a list of playlists in the user's playlist library.",
    "parameters": [
        {
            "name": "access_token",
            "type": "string",
            "required": True,
            "description": "Access token from login.",
        },
        {
            "name": "page_index",
            "type": "integer",
            "required": False,
            "default": 0,
            "description": "The index of the page to return.",
            "constraints": ["value >= 0"],
        },
        {
            "name": "page_limit",
            "type": "integer",
            "required": False,
            "default": 5,
            "description": "The maximum number of results to return per page.",
            "constraints": ["value >= 1, <= 20"],
        },
    ],
    "response_schemas": {
        "success": [{"playlist_id": 1, "title": "string", "is_public": True, "song_ids": [1]}],
        "failure": {"message": "string"},
    },
}

_DEMO_TURNS: list[tuple[str, str]] = [
    (
        "First, let me see which apps are available.\n\n```python\nprint(apis.api_docs.show_app_descriptions())\n```",
        "{app_descriptions}",
    ),
    (
        "The task is about Spotify. Let me list the Spotify APIs.\n\n"
        "```python\nprint(apis.api_docs.show_api_descriptions(app_name='spotify'))\n```",
        json.dumps(_SPOTIFY_APIS, indent=1),
    ),
    (
        "I need to log in before I can see the playlist library. Let me read the login API's doc.\n\n"
        "```python\nprint(apis.api_docs.show_api_doc(app_name='spotify', api_name='login'))\n```",
        json.dumps(_LOGIN_DOC, indent=1),
    ),
    (
        "The username is the supervisor's email. The password should be in the supervisor app; "
        "let me list its APIs.\n\n```python\nprint(apis.api_docs.show_api_descriptions(app_name='supervisor'))\n```",
        json.dumps(_SUPERVISOR_APIS, indent=1),
    ),
    (
        "Let me get the account passwords.\n\n"
        "```python\npasswords = apis.supervisor.show_account_passwords()\nprint(passwords)\n```",
        json.dumps(_PASSWORDS, indent=1),
    ),
    (
        "The passwords are a list of accounts; I will pick Spotify's by its account name and log in.\n\n"
        "```python\n"
        "spotify_password = next(account['password'] for account in passwords if account['account_name'] == 'spotify')\n"
        "login_result = apis.spotify.login(username='joyce-weav@gmail.com', password=spotify_password)\n"
        "spotify_access_token = login_result['access_token']\n"
        "print(login_result)\n```",
        json.dumps({"access_token": "fake-token-1a2b3c", "token_type": "Bearer"}, indent=1),
    ),
    (
        "Logged in. Let me read the doc of the playlist library API.\n\n"
        "```python\nprint(apis.api_docs.show_api_doc(app_name='spotify', api_name='show_playlist_library'))\n```",
        json.dumps(_LIBRARY_DOC, indent=1),
    ),
    (
        "The results are paginated with at most 20 per page, so I will collect all pages.\n\n"
        "```python\n"
        "playlists = []\n"
        "page_index = 0\n"
        "while True:\n"
        "    page = apis.spotify.show_playlist_library(\n"
        "        access_token=spotify_access_token, page_index=page_index, page_limit=20\n"
        "    )\n"
        "    if not page:\n"
        "        break\n"
        "    playlists.extend(page)\n"
        "    page_index += 1\n"
        "num_playlists = len(playlists)\n"
        "print(num_playlists)\n```",
        "23",
    ),
    (
        "There are 23 playlists. The task asks for a number, so I complete it with that answer.\n\n"
        "```python\napis.supervisor.complete_task(answer=num_playlists)\n```",
        "Marked the active task complete.",
    ),
]

KEY_INSTRUCTIONS = """Key instructions:
(1) Write exactly one ```python code block per message, ending with ``` on its own line. Only that first block is executed.
(2) Variables persist between code blocks, as in a Jupyter notebook.
(3) The example's names, emails, passwords and tokens are made up: they do not work in the actual task.
(4) Get account credentials from the supervisor app, and information about friends, family and coworkers from the phone app.
(5) Read an API's doc with show_api_doc before you call it for the first time.
(6) Work in small steps: write a short block, look at its output, then write the next.
(7) Many APIs return results in pages: loop over page_index, and use the largest page_limit allowed.
(8) When the task is done, call apis.supervisor.complete_task(answer=<answer>) if the task asks for an answer (just the entity or number, not a sentence), or apis.supervisor.complete_task() if it does not."""


def format_output(output: str) -> str:
    """An execution output as the model sees it (the same format in the demo and in real turns)."""
    return f"Output:\n```\n{output.rstrip(chr(10))}\n```"


def task_block(info: dict[str, Any]) -> str:
    """Date, supervisor and instruction of the actual task, from the environment's reset info."""
    missing = [key for key in ("instruction", "supervisor") if key not in info]
    if missing:
        raise ValueError(f"AppWorld reset info lacks {missing}; it has {sorted(info)}")
    supervisor = info["supervisor"]
    name = f"{supervisor.get('first_name', '')} {supervisor.get('last_name', '')}".strip()
    lines = []
    if info.get("datetime"):
        lines.append(f"Today's date is: {info['datetime']}")
    lines.append(
        f"My name is: {name}. My personal email is {supervisor.get('email', '')} "
        f"and phone number is {supervisor.get('phone_number', '')}."
    )
    lines.append(f"Task: {info['instruction']}")
    return "\n".join(lines)


def build_messages(info: dict[str, Any]) -> list[dict[str, str]]:
    """System prompt, demonstration, key instructions and the actual task, as chat messages."""
    app_descriptions = info.get("app_descriptions") or DEFAULT_APP_DESCRIPTIONS
    if not isinstance(app_descriptions, str):
        app_descriptions = json.dumps(app_descriptions, indent=1)
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": _FRAMING}]
    for assistant, output in _DEMO_TURNS:
        messages.append({"role": "assistant", "content": assistant})
        output = output.replace("{app_descriptions}", app_descriptions)
        messages.append({"role": "user", "content": format_output(output)})
    final = f"{KEY_INSTRUCTIONS}\n\nUsing these APIs, now generate code to solve the actual task:\n\n{task_block(info)}"
    messages[-1]["content"] += "\n\n" + final
    return messages
