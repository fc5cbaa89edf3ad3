"""The policy process's confinement on its own: a real forked process, every layer, checked from inside.

Runs in the main venv (pyseccomp is the only extra; skipped without it or without user namespaces)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from loop_agents.envs.appworld.config import DEFAULT_PYTHON

PYTHON = str(DEFAULT_PYTHON) if DEFAULT_PYTHON.exists() else sys.executable
REPO = Path(__file__).resolve().parents[2]

CHILD = r"""
import json, os, sys, errno, threading
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import pyseccomp  # noqa: F401 - found through ldconfig, which the view lacks
from loop_agents.sandbox import confine, landlock_rules
secret, scratch_root = Path(sys.argv[2]), Path(sys.argv[3])
confine.enter_namespaces()
pid = os.fork()
if pid:
    _, status = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(status))
c = confine.Confinement(new_root=scratch_root, read_only=[Path(sys.prefix), Path(sys.base_prefix), Path("/usr/lib"), Path("/lib"), Path("/lib64"), Path(sys.argv[1]) / "loop_agents"],
                        scratch=[Path("/tmp")], scratch_mb=4, scratch_inodes=64, landlock_abi=landlock_rules.abi_version())
confine.confine(c)
out = {"pid": os.getpid(), "root": sorted(os.listdir("/"))}
def attempt(name, fn):
    try:
        fn(); out[name] = "OK"
    except BaseException as error:
        out[name] = type(error).__name__ + ":" + str(getattr(error, "errno", ""))
attempt("read_secret", lambda: open(secret).read())
attempt("stat_secret", lambda: os.stat(secret))
attempt("thread", lambda: threading.Thread(target=lambda: None).start())
attempt("fork", os.fork)
attempt("socket", lambda: __import__("socket").socket())
attempt("write_lib", lambda: open(Path(sys.prefix) / "x", "w"))
attempt("chmod_lib", lambda: os.chmod(sys.executable, 0o777))
attempt("setxattr", lambda: os.setxattr("/tmp", "user.x", b"1"))
def fill():
    for n in range(1000):
        open(f"/tmp/f{n}", "w").close()
attempt("inodes", fill)
attempt("write_tmp", lambda: open("/tmp/ok2", "w").write("x") if os.path.exists("/tmp/f0") and os.remove("/tmp/f0") is None else None)
attempt("kill_parent", lambda: os.kill(int(sys.argv[4]), 0))
status = open("/dev/null").read()
print(json.dumps(out))
"""


@pytest.fixture
def confined(tmp_path):
    try:
        import pyseccomp  # noqa: F401
    except Exception:  # noqa: BLE001
        if PYTHON == sys.executable:
            pytest.skip("pyseccomp/libseccomp missing")
    secret = tmp_path / "secret.txt"
    secret.write_text("TRUTH")
    mount_point = tmp_path / "mnt"
    mount_point.mkdir()
    done = subprocess.run(
        [PYTHON, "-c", CHILD, str(REPO), str(secret), str(mount_point), str(os.getpid())],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    if "unshare" in done.stderr and "Operation not permitted" in done.stderr:
        pytest.skip("no user namespaces on this machine")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_confined_process_sees_only_its_view_and_is_alone(confined):
    assert confined["pid"] == 1
    assert "tmp" in confined["root"] and "proc" not in confined["root"]
    assert confined["read_secret"].startswith("FileNotFoundError") and confined["stat_secret"].startswith(
        "FileNotFound"
    )
    assert confined["kill_parent"].split(":")[0] in (
        "PermissionError",
        "ProcessLookupError",
    )  # seccomp, pid ns


def test_no_thread_process_or_socket(confined):
    assert confined["thread"].startswith("RuntimeError")
    assert confined["fork"] == "PermissionError:1" and confined["socket"] == "PermissionError:1"


def test_only_the_tmpfs_is_writable_and_it_is_capped(confined):
    assert confined["write_lib"].split(":")[1] in ("30", "13")  # EROFS (or Landlock's EACCES)
    assert confined["chmod_lib"] == "OSError:30" or confined["chmod_lib"].startswith("PermissionError")
    assert confined["setxattr"] == "PermissionError:1"
    assert confined["inodes"] == "OSError:28"  # ENOSPC at the inode cap
    assert confined["write_tmp"] == "OK"
