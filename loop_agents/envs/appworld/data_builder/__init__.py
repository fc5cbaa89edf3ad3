"""Offline builder of an AppWorld data root (`APPWORLD_ROOT/data`) for the real engine.

Runs inside the AppWorld venv (it imports `appworld` to create the app databases with AppWorld's
own models); `scripts/build_appworld_data.py` re-executes itself there. Nothing in this package
is imported by the trainer side.
"""
