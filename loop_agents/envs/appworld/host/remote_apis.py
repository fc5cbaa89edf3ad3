"""The policy process's side of AppWorld's remote-API path, over a channel the host opened.

AppWorld's `Requester` with `remote_apis_url` sends each app call with `requests.<method>(url, ...)` and keeps
no databases (`AppWorld.models is None`). Here that module attribute is replaced by `ChannelTransport`, which
frames the call over the socket the host handed in; the API process answers it (`api_process.py`). The
administrative calls AppWorld's remote mode also makes (load the databases from a path, save them to a path,
clear caches, set the clock and the random seed) become no-ops in this process: the host has already set the
API process up for the task, and that process refuses every route that is not one of the task's public app
APIs, so they could do nothing here anyway.

These are AppWorld 0.1.3.post1's names; `install` checks that each one exists and refuses to start otherwise.
"""

from __future__ import annotations

import importlib
import json
import socket
from typing import Any

from loop_agents.sandbox import framing

URL = "http://appworld-apis"  # never resolved: the transport sends the path over the channel
REPLY_LIMIT = 16 * 1024 * 1024
_ADMIN_CALLS = {
    "appworld.requester": ("set_remote_dbs", "set_remote_date_and_time", "set_remote_random_seed",
                           "set_remote_show_api_response_schemas", "unset_remote_date_and_time"),
    "appworld.environment": ("clear_remote_dbs_cache", "set_remote_dbs"),
    "appworld.apps.api_lib": ("save_remote_dbs", "clear_remote_dbs_cache", "set_remote_dbs"),
}  # fmt: skip


class Response:
    """What `Requester` reads of a `requests` response: status_code, text, json()."""

    def __init__(self, status_code: int, text: str) -> None:
        self.status_code = status_code
        self.text = text

    def json(self) -> Any:
        return json.loads(self.text)


class ChannelTransport:
    """Stands in for the `requests` module inside `appworld.requester`."""

    def __init__(self, channel: socket.socket) -> None:
        self.channel = channel
        self.sent = 0

    def _call(self, method: str, url: str, payload: Any, headers: dict | None) -> Response:
        path = url[len(URL) :] if url.startswith(URL) else url
        self.sent += 1
        request = {
            "id": self.sent,
            "method": method,
            "path": path,
            "payload": payload,
            "headers": headers or {},
        }
        framing.send(self.channel, request)
        while True:  # a reply to a call that an earlier cell's timeout interrupted is skipped
            reply = framing.receive(self.channel, REPLY_LIMIT)
            if reply.get("id") == self.sent:
                return Response(int(reply["status"]), str(reply["text"]))

    def get(self, url: str, params: Any = None, headers: dict | None = None, **_: Any) -> Response:
        return self._call("GET", url, params, headers)

    def post(
        self, url: str, data: Any = None, json: Any = None, headers: dict | None = None, **_: Any
    ) -> Response:
        return self._call("POST", url, json if data is None else data, headers)

    def put(self, url: str, json: Any = None, headers: dict | None = None, **_: Any) -> Response:
        return self._call("PUT", url, json, headers)

    def patch(self, url: str, json: Any = None, headers: dict | None = None, **_: Any) -> Response:
        return self._call("PATCH", url, json, headers)

    def delete(self, url: str, json: Any = None, headers: dict | None = None, **_: Any) -> Response:
        return self._call("DELETE", url, json, headers)


def _no_op(*_: Any, **__: Any) -> None:
    return None


def _admin_targets() -> list[tuple[str, str]]:
    return [(module, name) for module, names in _ADMIN_CALLS.items() for name in names]


def check_targets() -> None:
    """Every AppWorld name this module replaces exists (else: one line naming it, raised as RuntimeError)."""
    for module_name, name in [*_admin_targets(), ("appworld.requester", "requests")]:
        if not hasattr(importlib.import_module(module_name), name):
            raise RuntimeError(
                f"AppWorld hook target {module_name}.{name} is missing (written for 0.1.3.post1)"
            )


def install(channel: socket.socket) -> None:
    """Routes this process's AppWorld remote calls over `channel`; admin calls become no-ops."""
    check_targets()
    for module_name, name in _admin_targets():
        setattr(importlib.import_module(module_name), name, _no_op)
    importlib.import_module("appworld.requester").requests = ChannelTransport(channel)
