"""Warm-start demonstrations for AppWorld: scripted solutions of the self-made scenarios, with deliberate noise.

`scripted` writes each task's code cells from its template and public data (the task's own values),
`noise` makes the wrong variants (wrong API, wrong argument, wrong answer), `play` runs them through the
real engine in the AppWorld venv and records outputs and test results, and `warm_start` turns the played
episodes (a clean one kept only if the engine's tests pass, a noisy one only if they fail) into chat
demonstrations for the same warm-start path the gem hunt demo uses.
"""
