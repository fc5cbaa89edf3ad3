"""AppWorld: the real engine (own venv) behind a pool of loopback env servers, plus an offline data builder.

Importing this package never imports `appworld`; the trainer talks to AppWorld only over HTTP.
"""
