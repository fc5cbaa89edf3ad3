"""Base databases (every app's tables, plus the API-doc rows) and the API-doc JSON files.

These are the parts of `APPWORLD_ROOT/data` that every task shares: `base_dbs/<app>.db` for all
12 apps and `api_docs/standard/<app>.json` for the 11 public apps (appworld-offline.md §3 steps 2-3).
"""

from __future__ import annotations

import json
from pathlib import Path


def build_base_dbs(data_dir: Path) -> None:
    """Writes `data_dir/base_dbs/<app>.db`: empty app tables and one `api_docs.ApiDoc` row per API."""
    from appworld.api_docs import prepare_api_docs
    from appworld.apps import get_all_apps
    from appworld.collections.models import ModelCollection

    all_apps = get_all_apps()
    models = ModelCollection.load(
        to_db_home_path=":memory:loop_agents_base",
        from_db_home_path=":memory:loop_agents_base",
        load_apps=all_apps,
        create_db=True,
    )
    api_doc_model = models.api_docs.ApiDoc
    for app_name in get_all_apps(skip_admin=True):
        for doc in prepare_api_docs(app_name, include_private_apis=False):
            row = dict(doc)
            row["app_name_"] = row.pop("app_name")
            api_doc_model.create_save(**row)
    models.save(
        db_home_path=str(data_dir / "base_dbs"),
        format="full",
        app_names=all_apps,
        delete_if_exists=True,
    )
    models.close()


def write_api_docs(data_dir: Path) -> None:
    """Writes `data_dir/api_docs/standard/<app>.json` in AppWorld's standard doc format."""
    from appworld.apps import get_all_apps
    from appworld.collections.api_docs import ApiDocCollection
    from appworld.common.constants import CANARY_STRING

    out_dir = data_dir / "api_docs" / "standard"
    out_dir.mkdir(parents=True, exist_ok=True)
    docs = ApiDocCollection.build(load_apps=tuple(get_all_apps(skip_admin=True)))
    for app_name, api_name_to_doc in docs.items():
        payload = {
            api_name: {**dict(doc), "canary_string": CANARY_STRING}
            for api_name, doc in api_name_to_doc.items()
        }
        (out_dir / f"{app_name}.json").write_text(json.dumps(payload, indent=1, default=str))
