"""OpenEnv, both ways (docs/environments/openenv.md).

- client (`env=openenv`): LOOP trains on any OpenEnv environment server (`family.py`, `client.py`): one OpenEnv
  WebSocket session per episode through OpenEnv's own `GenericEnvClient`, text actions through a configurable field.
- server (`python -m loop_agents.envs.openenv serve <family> [overrides]`): any of our families served as an OpenEnv
  environment with OpenEnv's own `Environment` base class and `create_app` (`server.py`), on 127.0.0.1 only.

`openenv-core` (the `envs` extra) is imported lazily by these modules' users: importing this package costs nothing.
"""
