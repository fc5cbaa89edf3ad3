"""Read back what an offline wandb run wrote: the history rows of its `run-<id>.wandb` file.

The file is wandb's transaction log: a 7-byte header (`:W&B`, magic 0xBEE1, version), then LevelDB's log format
(32 KiB blocks of records, each with a 7-byte header: CRC32, length, type FULL/FIRST/MIDDLE/LAST) whose payloads
are `wandb_internal_pb2.Record` protobufs. wandb 0.31 ships no Python reader of its own (its Go core writes the
file), so the tests read it here, with wandb's own protobuf classes.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from pathlib import Path

BLOCK = 32 * 1024
HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: Path) -> Iterator[bytes]:
    """The payloads of the log's records, in order."""
    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a wandb transaction log"
    position, pending = HEADER, b""
    while position + HEADER <= len(data):
        left_in_block = BLOCK - position % BLOCK
        if left_in_block < HEADER:  # a block's tail too short for a header is padding
            position += left_in_block
            continue
        _crc, length, kind = struct.unpack("<IHB", data[position : position + HEADER])
        payload = data[position + HEADER : position + HEADER + length]
        position += HEADER + length
        if kind == FULL:
            yield payload
        elif kind == FIRST:
            pending = payload
        elif kind == MIDDLE:
            pending += payload
        elif kind == LAST:
            yield pending + payload
        else:  # zero padding up to the block's end
            position += BLOCK - position % BLOCK if position % BLOCK else 0


def history_rows(run_dir: Path) -> list[dict]:
    """Every history row an offline wandb run under `run_dir` logged, as {key: value}."""
    from wandb.proto import wandb_internal_pb2

    (log_file,) = run_dir.glob("wandb/offline-run-*/run-*.wandb")
    rows = []
    for payload in records(log_file):
        record = wandb_internal_pb2.Record.FromString(payload)
        if record.WhichOneof("record_type") == "history":
            rows.append({"/".join(item.nested_key) or item.key: json.loads(item.value_json)
                         for item in record.history.item})  # fmt: skip
    return rows
