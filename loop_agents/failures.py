"""Which failures of a training process a rerun of the same command can fix, and the exit codes that say so.

The training process classifies its own uncaught Python error: a known transient one (a Ray actor, node or
raylet that died, an object lost with it, a dropped connection, a timeout) exits TRANSIENT; any other exits
PERMANENT after its traceback (the same command would meet it again); bad input it can name in one line
exits UNRECOVERABLE. The supervisor reruns TRANSIENT, deaths by signal (SIGKILL from the OOM killer, a
segfault, an abort; 128+N from a shell or a signal handler) and exit 1 without a classified Python error (a
native runtime's hard exit, as Ray's core worker when its raylet dies); never 0, UNRECOVERABLE or PERMANENT.
"""

from __future__ import annotations

UNRECOVERABLE = 2  # bad input, named in one line
PERMANENT = 3  # an unclassified Python error: its traceback is above, a rerun would meet it again
TRANSIENT = 75  # EX_TEMPFAIL (sysexits.h): "try again later"

# Ray's exceptions by class name (no import of ray needed to classify): the cluster lost a process or data
_TRANSIENT_RAY = {
    "RayActorError",
    "ActorDiedError",
    "ActorUnavailableError",
    "RaySystemError",
    "ObjectLostError",
    "OwnerDiedError",
    "ObjectFetchTimedOutError",
    "NodeDiedError",
    "WorkerCrashedError",
    "LocalRayletDiedError",
    "GetTimeoutError",
    "OutOfMemoryError",
    "RpcError",
    "ObjectReconstructionFailedError",
}
_TRANSIENT_BUILTIN = (ConnectionError, TimeoutError)


def is_transient(err: BaseException) -> bool:
    """True if `err`, or an error it was raised from, is one a rerun can get past (see the module docstring)."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, _TRANSIENT_BUILTIN):
            return True
        if any(
            k.__name__ in _TRANSIENT_RAY and k.__module__.startswith("ray.") for k in type(current).__mro__
        ):
            return True
        current = current.__cause__ or current.__context__
    return False


def worth_retrying(code: int) -> bool:
    """Whether the supervisor reruns a child that ended with `code` (Popen's returncode)."""
    return code < 0 or code > 128 or code in (1, TRANSIENT)


def exit_code_for(err: BaseException) -> int:
    """The exit code for an uncaught `err`: TRANSIENT or PERMANENT."""
    return TRANSIENT if is_transient(err) else PERMANENT
