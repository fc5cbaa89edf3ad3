"""The compact AppWorld prompt (`env.prompt=compact`): the task, the supervisor and the API signatures it needs.

The full prompt (appworld_prompt.py: framing, a nine-turn worked example, key instructions) is about 3.5k
tokens with the tiny tokenizer, more than a tiny CPU model can attend over usefully. This one lists the
signatures of the APIs the self-made scenarios use (checked against the engine's own API docs by
tests/rollout/test_appworld_compact_prompt.py), names `apis.api_docs` for every other API, and states the
task. It has no worked example: the warm start's demonstrations teach the format instead.
"""

from __future__ import annotations

from typing import Any

SYSTEM_PROMPT = (
    "You do your supervisor's task by writing Python code. Reply with one ```python block per turn; "
    "it runs in a REPL that keeps variables, and you see its output."
)

# (app, api, the parameters shown, what it returns). Only parameters of the real API are listed, in the
# engine's order; a parameter shown with "=value" is optional with that default.
API_SIGNATURES: tuple[tuple[str, str, str, str], ...] = (
    ("supervisor", "show_account_passwords", "", "[{account_name, password}]"),
    ("supervisor", "show_profile", "", "{first_name, last_name, email, phone_number}"),
    ("supervisor", "show_active_task", "", "{instruction}"),
    ("supervisor", "complete_task", "answer=None", ""),
    ("simple_note", "login", "username, password", "{access_token}"),
    ("simple_note", "search_notes", "access_token, query='', tags=None, page_index=0, page_limit=5",
     "[{note_id, title, tags, created_at}]"),
    ("simple_note", "show_note", "note_id, access_token", "{note_id, title, content, tags}"),
    ("simple_note", "update_note", "note_id, access_token, content=None", ""),
    ("simple_note", "delete_note", "note_id, access_token", ""),
    ("todoist", "login", "username, password", "{access_token}"),
    ("todoist", "show_projects", "access_token, page_limit=5", "[{project_id, name}]"),
    ("todoist", "show_tasks", "project_id, access_token",
     "{no_section_tasks: [{task_id, title, priority, is_completed, due_date}], sections: [{tasks: [...]}]}"),
    ("todoist", "create_task", "project_id, title, access_token", "{task_id}"),
    ("todoist", "update_task", "task_id, access_token, is_completed=None", ""),
    ("venmo", "login", "username, password", "{access_token}"),
    ("venmo", "search_friends", "access_token, query='', page_limit=5", "[{first_name, last_name, email}]"),
    ("venmo", "create_transaction", "receiver_email, amount, access_token, description=''", "{transaction_id}"),
    ("venmo", "show_transactions",
     "access_token, user_email=None, min_created_at='1500-01-01', page_index=0, page_limit=5",
     "[{amount, created_at, sender: {email}, receiver: {email}}]"),
)  # fmt: skip

NOTES = (
    "Log in with your supervisor's email and the app's password from show_account_passwords. "
    "Lists come in pages of at most page_limit (up to 20). Other APIs: "
    "apis.api_docs.show_api_descriptions(app_name) and apis.api_docs.show_api_doc(app_name, api_name). "
    "Finish with apis.supervisor.complete_task(answer=...) if the task asks a question, else "
    "apis.supervisor.complete_task()."
)


def signature_lines() -> list[str]:
    """One line per API: `apis.<app>.<api>(params) -> returns`."""
    lines = []
    for app, api, params, returns in API_SIGNATURES:
        line = f"apis.{app}.{api}({params})"
        lines.append(f"{line} -> {returns}" if returns else line)
    return lines


def compact_task_block(info: dict[str, Any]) -> str:
    """Supervisor, date and instruction of the task, from the environment's reset info."""
    missing = [key for key in ("instruction", "supervisor") if key not in info]
    if missing:
        raise ValueError(f"AppWorld reset info lacks {missing}; it has {sorted(info)}")
    supervisor = info["supervisor"]
    name = f"{supervisor.get('first_name', '')} {supervisor.get('last_name', '')}".strip()
    lines = [f"Supervisor: {name}, {supervisor.get('email', '')}, {supervisor.get('phone_number', '')}"]
    if info.get("datetime"):
        lines.append(f"Today: {info['datetime']}")
    lines.append(f"Task: {info['instruction']}")
    return "\n".join(lines)


def build_compact_messages(info: dict[str, Any]) -> list[dict[str, str]]:
    """System prompt and one user message: the API signatures, the notes, then the task."""
    user = "APIs:\n" + "\n".join(signature_lines()) + f"\n{NOTES}\n\n{compact_task_block(info)}"
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]
