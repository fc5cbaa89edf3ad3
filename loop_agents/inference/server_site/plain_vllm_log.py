"""vLLM's log formatter, writing a multi-line message as plain lines (the server's log is a file).

vLLM's NewLineFormatter joins the lines of one message with '\\r\\n' and the record's prefix; in a log file the
'\\r' is noise that `cat` hides and editors show as ^M. This subclass ends every line with '\\n' only. It lives
here, on the server's PYTHONPATH (see sitecustomize.py), because the server's Python may be another
environment than the trainer's; `loop_agents/inference/plain_log.py` names it in the logging config it writes.
"""

from vllm.logging_utils import NewLineFormatter


class PlainNewLineFormatter(NewLineFormatter):
    def format(self, record):  # noqa: ANN001, ANN201 - logging's signature
        return super().format(record).replace("\r\n", "\n")
