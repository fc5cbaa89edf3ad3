"""Scenario templates: each turns (world, variant) into one task with its unit tests and solution."""

from __future__ import annotations

from loop_agents.envs.appworld.data_builder.templates.base import Template
from loop_agents.envs.appworld.data_builder.templates.cross_app import CROSS_APP_TEMPLATES
from loop_agents.envs.appworld.data_builder.templates.notes import NOTE_TEMPLATES
from loop_agents.envs.appworld.data_builder.templates.spotify import SPOTIFY_TEMPLATES
from loop_agents.envs.appworld.data_builder.templates.todoist import TODOIST_TEMPLATES
from loop_agents.envs.appworld.data_builder.templates.venmo import VENMO_TEMPLATES

ALL_TEMPLATES: tuple[Template, ...] = (
    *NOTE_TEMPLATES,
    *TODOIST_TEMPLATES,
    *VENMO_TEMPLATES,
    *SPOTIFY_TEMPLATES,
    *CROSS_APP_TEMPLATES,
)
