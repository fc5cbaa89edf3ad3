"""Is a saved state only row changes an API call can make? Decided by SQLite's own parser, not by searching text.

AppWorld's evaluator replays the saved change records (`[statement, parameters, executemany]`, one per line of
`dbs/<app>.jsonl`) on the app's base database. A record is accepted if it is one of the task's own start records
(the same lines, in order, at the start of the file: AppWorld's save writes them first) or if SQLite, compiling
the statement on the app's base database with an authorizer, reports exactly one top-level INSERT, UPDATE or
DELETE, on one of the app's own tables (an ordinary or full-text table; not `sqlite_*`, not a full-text index's
shadow table), and nothing else than reads of those tables, sub-selects and functions (`load_extension` excepted).
ATTACH, DETACH, PRAGMA, VACUUM, CREATE, DROP, ALTER, transactions, several statements: refused, whatever words
the values or names hold (a note that says "see attached" and gmail's `attachments` table are row changes).

The statement is compiled, never run: the base database is opened read-only and `query_only`, so its first step
fails before any row is touched; the authorizer has seen the whole statement (triggers included) by then.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

_WRITES = {sqlite3.SQLITE_INSERT: "INSERT", sqlite3.SQLITE_UPDATE: "UPDATE", sqlite3.SQLITE_DELETE: "DELETE"}
_ACTIONS = (
    "CREATE_INDEX CREATE_TABLE CREATE_TEMP_INDEX CREATE_TEMP_TABLE CREATE_TEMP_TRIGGER CREATE_TEMP_VIEW "
    "CREATE_TRIGGER CREATE_VIEW DELETE DROP_INDEX DROP_TABLE DROP_TEMP_INDEX DROP_TEMP_TABLE DROP_TEMP_TRIGGER "
    "DROP_TEMP_VIEW DROP_TRIGGER DROP_VIEW INSERT PRAGMA READ SELECT TRANSACTION UPDATE ATTACH DETACH "
    "ALTER_TABLE REINDEX ANALYZE CREATE_VTABLE DROP_VTABLE FUNCTION SAVEPOINT RECURSIVE"
).split()
_ACTION_NAMES = {
    getattr(sqlite3, f"SQLITE_{name}"): name for name in _ACTIONS if hasattr(sqlite3, f"SQLITE_{name}")
}
_FTS5_SHADOWS = ("_data", "_idx", "_content", "_docsize", "_config")


def _app_tables(connection: sqlite3.Connection) -> tuple[set[str], list[str]]:
    """(the app's tables, its virtual tables)."""
    rows = connection.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall()
    virtual = [name for name, sql in rows if str(sql or "").upper().startswith("CREATE VIRTUAL TABLE")]
    shadows = {v + suffix for v in virtual for suffix in _FTS5_SHADOWS}
    tables = {name for name, _ in rows if not name.lower().startswith("sqlite_") and name not in shadows}
    return tables, virtual


class _AppChecker:
    """One app's base database, read-only, and the row changes SQLite says a statement makes on it."""

    def __init__(self, base_db: Path) -> None:
        self.base_db = base_db
        self.writes: set[tuple[str, str]] = set()  # (kind, table): an UPDATE reports each column it sets
        self.refused: list[str] = []
        self._open()

    def _open(self) -> None:
        # no statement cache: a cached statement is not compiled again, and the authorizer sees only compiles
        self.connection = sqlite3.connect(
            f"file:{self.base_db}?mode=ro", uri=True, isolation_level=None, cached_statements=0
        )
        self.connection.execute("PRAGMA query_only = 1")
        self.tables, virtual = _app_tables(self.connection)
        for table in virtual:  # connected now: a full-text module runs statements of its own when it connects
            self.connection.execute(f'SELECT 1 FROM "{table}" WHERE 0').fetchall()
        self.connection.set_authorizer(self._authorize)

    def _authorize(self, action: int, arg1: Any, arg2: Any, database: Any, trigger: Any) -> int:
        if action in _WRITES and database == "main" and arg1 in self.tables:
            if trigger is None:
                self.writes.add((_WRITES[action], arg1))
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_READ and database == "main" and arg1 in self.tables:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_SELECT:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_FUNCTION and str(arg2).lower() != "load_extension":
            return sqlite3.SQLITE_OK
        self.refused.append(f"{_ACTION_NAMES.get(action, action)} {arg1} {arg2} {database}")
        return sqlite3.SQLITE_DENY

    def problem(self, record: Any) -> str:
        """'' if `record` is one row change on this app's tables, else why not."""
        if not (isinstance(record, list) and len(record) == 3 and isinstance(record[0], str)):
            return "is not a change record"
        statement, parameters, executemany = record
        self.writes, self.refused = set(), []
        error: Exception | None = None
        try:
            if executemany:
                self.connection.executemany(statement, parameters)
            else:
                self.connection.execute(statement, parameters)
        except sqlite3.OperationalError as failed:  # the expected end: the first step may not write
            error = None if "readonly" in str(failed) else failed
        except (
            sqlite3.Error,
            ValueError,
            TypeError,
        ) as failed:  # bindings that do not fit, several statements
            error = failed
        if self.refused or error is not None:
            self.connection.close()  # a refused compile can leave the connection's schema state changed
            self._open()
        if self.refused:
            return f"is not a row change (SQLite authorizer: {self.refused[0]})"
        if error is not None:
            return f"does not compile: {type(error).__name__}: {error}"
        if len(self.writes) != 1:
            return f"makes {len(self.writes)} row changes"
        return ""

    def close(self) -> None:
        self.connection.close()


class SavedChangesCheck:
    """Checks an output `dbs/` folder of one task against its base databases and its own start records."""

    def __init__(self, root: Path, task_id: str) -> None:
        self.base_dbs = root / "data" / "base_dbs"
        self.start = root / "data" / "tasks" / task_id / "dbs"
        self.checkers: dict[str, _AppChecker] = {}

    def prepare(self, apps: list[str]) -> None:
        """Opens these apps' base databases now (before the episode ends, so that the check is quick then)."""
        for app in apps:
            self._checker(app)

    def _checker(self, app: str) -> _AppChecker | None:
        if app not in self.checkers:
            base = self.base_dbs / f"{app}.db"
            if not base.is_file():
                return None
            self.checkers[app] = _AppChecker(base)
        return self.checkers[app]

    def problem(self, dbs: Path) -> str:
        """'' if every saved record in `dbs` is accepted, else a reason naming the file and line."""
        for path in sorted(dbs.glob("*.jsonl")):
            start_path = self.start / path.name
            start = start_path.read_text().splitlines() if start_path.is_file() else []
            checker = self._checker(path.stem)
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    return f"{path.name}:{number} is not a change record"
                if number <= len(start) and _same_record(start[number - 1], record):
                    continue
                if checker is None:
                    return f"{path.name}: no base database for app {path.stem!r}"
                why = checker.problem(record)
                if why:
                    return f"{path.name}:{number} {why}: {str(record)[:120]!r}"
        return ""

    def close(self) -> None:
        for checker in self.checkers.values():
            checker.close()
        self.checkers = {}


def _same_record(start_line: str, record: Any) -> bool:
    try:
        return json.loads(start_line) == record
    except ValueError:
        return False
