"""Run at start-up by every Python process of a vLLM server tree: die with your parent.

The server's environment puts this directory first on PYTHONPATH and sets LOOP_AGENTS_DIE_WITH_PARENT=1, so
vLLM's own children (EngineCore, spawned by the api_server; its Workers and multiprocessing's resource tracker)
get a parent-death SIGKILL too. Without it, a SIGKILLed api_server (Ray SIGKILLs the children of a dead
worker, so a SIGKILLed training driver ends that way) leaves EngineCore running forever under init, holding
its CPU threads and KV-cache memory. A process that already has a parent-death signal (the api_server, which
we spawn with SIGTERM) keeps it. Another sitecustomize further down the path is still imported.

Why not a vLLM plugin, as the patches of vLLM are (`loop_agents/patches/vllm_plugin.py`): the signal must be armed
before the process imports anything (a parent that dies during EngineCore's ~10 s of imports would orphan it), and
in every Python process of the tree, including multiprocessing's resource tracker, which never loads vLLM's
plugins. Only interpreter start-up (sitecustomize) runs that early everywhere.
"""

import os
import sys

if os.environ.get("LOOP_AGENTS_DIE_WITH_PARENT") == "1" and sys.platform.startswith("linux"):
    import ctypes
    import signal

    _PR_SET_PDEATHSIG, _PR_GET_PDEATHSIG = 1, 2
    _libc = ctypes.CDLL("libc.so.6", use_errno=True)
    _current = ctypes.c_int(0)
    _libc.prctl(_PR_GET_PDEATHSIG, ctypes.byref(_current), 0, 0, 0)
    if _current.value == 0:
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() == 1:  # the parent died before the signal was armed
            os._exit(1)


def _import_the_next_sitecustomize() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    module = sys.modules.pop(__name__)
    saved = list(sys.path)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    try:
        import sitecustomize  # noqa: F401
    except ImportError:
        sys.modules[__name__] = module
    finally:
        sys.path[:] = saved


_import_the_next_sitecustomize()
