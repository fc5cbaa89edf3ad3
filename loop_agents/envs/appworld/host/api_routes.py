"""Which requests the policy may send to the API process: the public APIs of the task's apps, nothing else.

The allow list is built from AppWorld's own API docs (`_get_api_name_to_doc(app, include_private_apis=False)`,
the routes an agent is documented to call). Left out by shape: the server's administrative routes (`/dbs`,
`/dbs/save`, `/dbs/cache`, `/date_time`, `/seed`, `/show_api_response_schemas`, `/`), the `admin` app, private
APIs, FastAPI's `/docs` and `/openapi.json`, and any path with a dot segment, an escape or a query string.
"""

from __future__ import annotations

import re

_PARAMETER = re.compile(r"\{[^}/]+\}")
_SEGMENT = "[^/?#%\\\\]+"


def _template_regex(path: str) -> re.Pattern[str]:
    parts = _PARAMETER.split(path)
    return re.compile(
        "".join(re.escape(part) + (_SEGMENT if i < len(parts) - 1 else "") for i, part in enumerate(parts))
    )


class RouteAllowList:
    def __init__(self, apps: list[str]) -> None:
        from appworld.requester import _get_api_name_to_doc

        self.routes: list[tuple[str, re.Pattern[str]]] = []
        for app in apps:
            if app == "admin":
                continue
            for doc in _get_api_name_to_doc(app, include_private_apis=False).values():
                self.routes.append((doc["method"].upper(), _template_regex(doc["path"])))

    def allows(self, method: str, path: str) -> bool:
        if not isinstance(path, str) or any(segment in (".", "..") for segment in path.split("/")):
            return False
        return any(method == allowed and regex.fullmatch(path) for allowed, regex in self.routes)
