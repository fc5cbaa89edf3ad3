"""OS sandbox for untrusted code, without root: namespaces, Landlock, seccomp, rlimits.

Stdlib only (plus the optional `landlock` and `pyseccomp` packages), because it runs inside the
AppWorld venv, which must not import the rest of `loop_agents`. `layers` detects and applies the
layers; `framing` is the length-prefixed JSON channel between a sandboxed child and its parent.
"""
