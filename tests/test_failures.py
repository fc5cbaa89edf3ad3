"""Which Python errors of the training process the supervisor may rerun (loop_agents/failures.py)."""

from __future__ import annotations

import pytest

from loop_agents.failures import PERMANENT, TRANSIENT, exit_code_for, is_transient, worth_retrying


def _raised_from(cause: BaseException, outer: BaseException) -> BaseException:
    try:
        try:
            raise cause
        except BaseException as inner:
            raise outer from inner
    except BaseException as err:
        return err


def test_ray_losing_a_process_is_transient() -> None:
    from ray.exceptions import ActorDiedError, NodeDiedError, ObjectLostError, RpcError

    assert is_transient(ActorDiedError())
    assert is_transient(NodeDiedError("node gone"))
    assert is_transient(RpcError("GCS unavailable"))
    assert is_transient(ObjectLostError("0" * 56, None, "collect"))
    assert is_transient(_raised_from(ConnectionRefusedError(), RuntimeError("collect failed")))


@pytest.mark.parametrize(
    "err",
    [
        NotADirectoryError(20, "Not a directory"),
        PermissionError(13, "Permission denied"),
        ValueError("bad"),
        RuntimeError("CUDA out of memory"),
    ],
)
def test_errors_a_rerun_meets_again_are_permanent(err: BaseException) -> None:
    assert not is_transient(err) and exit_code_for(err) == PERMANENT


def test_an_application_error_inside_a_ray_task_is_permanent() -> None:
    """RayTaskError wraps what the actor raised (here a corrupt file): a rerun reads the same file."""
    from ray.exceptions import RayTaskError

    wrapped = RayTaskError(
        "load", "Traceback ...", ValueError("SafetensorError: truncated")
    ).as_instanceof_cause()
    assert not is_transient(wrapped)
    assert exit_code_for(ActorDiedError()) == PERMANENT  # a name alone, outside ray, is not enough


class ActorDiedError(Exception):
    """Not Ray's: same-sounding names from other libraries are not classified by name."""


def test_torch_out_of_memory_is_not_rays() -> None:
    import torch

    assert not is_transient(torch.cuda.OutOfMemoryError("CUDA out of memory"))


def test_retry_codes() -> None:
    assert worth_retrying(-9) and worth_retrying(137) and worth_retrying(TRANSIENT) and worth_retrying(1)
    assert not any(worth_retrying(code) for code in (0, 2, PERMANENT))
